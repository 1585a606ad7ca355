# Sourced by scripts/test.sh, demo.sh and selfcheck.sh: configure_build DIR [CMAKE_ARG...]
# configures the Release build DIR with the generator it already has (a build configured
# before keeps working), or Ninja for a new one: a target's sources compile while the
# libraries below it still link, so both cores stay busy across the layer chain.
configure_build() {
  local dir=$1 generator
  shift
  generator=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$dir/CMakeCache.txt" 2>/dev/null || true)
  if [[ -z $generator ]]; then
    if command -v ninja >/dev/null 2>&1; then generator=Ninja; else generator="Unix Makefiles"; fi
  fi
  cmake -S . -B "$dir" -G "$generator" -DCMAKE_BUILD_TYPE=Release "$@"
}
