# Sourced by the scripts that keep a virtual environment under target/:
#   venv_with DIR REQUIREMENT...
# makes DIR (python3 -m venv) and installs the requirements from PyPI, once:
# a marker named after the requirements' hash says they are there, so a
# changed list installs again.
venv_with() {
  local dir=$1
  shift
  local marker
  marker="$dir/.installed-$(echo "$*" | sha256sum | cut -c1-12)"
  if [[ ! -e "$marker" ]]; then
    echo "making $dir: $*" >&2
    [[ -x "$dir/bin/pip" ]] || python3 -m venv "$dir"
    "$dir/bin/pip" install --quiet --disable-pip-version-check "$@"
    touch "$marker"
  fi
}
