# Sourced by the scripts that build a pinned Go module's commands from the
# module proxy (build-kubernetes.sh, build-module.sh).

# module_source MODULE VERSION DEST: the module's source, downloaded through
# the module proxy (or found in the module cache), copied writable into DEST
# without its workspace and vendor directory, so the copy's go.mod can be
# edited and built with -mod=mod.
module_source() {
  local module=$1 version=$2 dest=$3 dir
  # TOOLCHAIN: the Go release a module whose go line is newer than this
  # machine's Go needs, even to download it.
  dir=$(env ${TOOLCHAIN:+GOTOOLCHAIN=$TOOLCHAIN} GOWORK=off GOFLAGS=-mod=mod "${GO:-go}" mod download -json "$module@$version" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
  if [ -z "$dir" ] || [ ! -d "$dir" ]; then
    echo "go mod download $module@$version gave no source directory" >&2
    return 1
  fi
  cp -r "$dir/." "$dest"
  chmod -R u+w "$dest"
  rm -rf "$dest/go.work" "$dest/go.work.sum" "$dest/vendor"
}

# missing_binaries OUT NAME...: the NAMEs with no executable in OUT, one a line.
missing_binaries() {
  local out=$1 n
  shift
  for n in "$@"; do [ -x "$out/$n" ] || echo "$n"; done
}
