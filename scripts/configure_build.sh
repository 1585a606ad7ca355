# Sourced by scripts/test.sh, demo.sh and selfcheck.sh: configure_build DIR [CMAKE_ARG...]
# configures the Release build DIR with the generator it already has (a build configured
# before keeps working), or, for a new one, Ninja with unity builds (CMAKE_UNITY_BUILD: a
# batch of up to eight sources per translation unit, so the headers parse once a batch; a
# cold build of everything in about 0.7 of the time of one source per unit).
#
# The Python package's build (pyproject.toml) is a Ninja unity build too, in
# build-python-TAG/: as deep in the checkout as build/, so every compile there has the same
# command line, relative paths included (ccache hashes a path under the checkout relative to
# the compiler's working directory, CCACHE_BASEDIR), and `pip install .` after this build
# hits its ccache entries for every library source they share.
configure_build() {
  local dir=$1 generator
  shift
  generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
  local unity=()
  if [[ -z $generator ]]; then unity=(-DCMAKE_UNITY_BUILD=ON); fi
  cmake -S . -B "$dir" -G "${generator:-Ninja}" -DCMAKE_BUILD_TYPE=Release "${unity[@]}" "$@"
}
