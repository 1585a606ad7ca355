# Sourced by scripts/test.sh, demo.sh and selfcheck.sh: configure_build DIR [CMAKE_ARG...]
# configures the Release build DIR with the generator it already has (a build configured
# before keeps working), or Unix Makefiles for a new one. Not Ninja: ccache hashes a source's
# path relative to the compiler's working directory, which Makefiles put at build/LAYER/ —
# as deep as the Python package's Ninja build, build/python-TAG/ — so `pip install .` hits
# the library objects this build made. From build/ itself (Ninja) every one of them missed.
configure_build() {
  local dir=$1 generator
  shift
  generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
  cmake -S . -B "$dir" -G "${generator:-Unix Makefiles}" -DCMAKE_BUILD_TYPE=Release "$@"
}
