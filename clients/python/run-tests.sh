#!/usr/bin/env bash
# Installs the package from this folder into an empty target, as a user would and without network
# (pip --no-deps --no-build-isolation, Debian's python3), then runs the unittest suite against that
# installed copy, from outside the source tree. The tests start a real server from this checkout.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
target=$(mktemp -d)
trap 'rm -rf "$target" "$here/build" "$here"/*.egg-info' EXIT
"$python" -m pip install --quiet --no-deps --no-build-isolation --root-user-action=ignore --target "$target" "$here"
cd "$target"
echo "testing the installed copy: $(PYTHONPATH="$target" "$python" -c 'import sessionstate; print(sessionstate.__file__)')"
PYTHONPATH="$target" "$python" -m unittest discover --start-directory "$here/tests" --top-level-directory "$here/tests" --verbose
