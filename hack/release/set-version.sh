#!/usr/bin/env bash
# The version a release names, in the three places a user's install takes its image
# from: charts/gantry/Chart.yaml (version and appVersion; values.yaml's image.tag
# defaults to appVersion) and config/manager/kustomization.yaml (newTag).
#
#   hack/release/set-version.sh v0.2.0           set it before tagging v0.2.0
#   hack/release/set-version.sh --check v0.2.0   fail unless all three name v0.2.0
set -euo pipefail
cd "$(dirname "$0")/../.."

check=0
if [[ "${1:-}" == "--check" ]]; then check=1; shift; fi
v=${1:?usage: set-version.sh [--check] vX.Y.Z}
[[ ${v} =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || { echo "set-version: ${v} is not vX.Y.Z" >&2; exit 2; }

chart_version=$(sed -n 's/^version: *\(.*\)$/\1/p' charts/gantry/Chart.yaml)
app_version=$(sed -n 's/^appVersion: *"\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' charts/gantry/Chart.yaml)
kustomize_tag=$(sed -n 's/^ *newTag: *\(.*\)$/\1/p' config/manager/kustomization.yaml)

if [[ ${check} == 1 ]]; then
  ok=1
  [[ ${chart_version} == "${v#v}" ]] || { echo "Chart.yaml version is ${chart_version}, not ${v#v}" >&2; ok=0; }
  [[ ${app_version} == "${v}" ]] || { echo "Chart.yaml appVersion is ${app_version}, not ${v}" >&2; ok=0; }
  [[ ${kustomize_tag} == "${v}" ]] || { echo "config/manager newTag is ${kustomize_tag}, not ${v}" >&2; ok=0; }
  [[ ${ok} == 1 ]] || { echo "run hack/release/set-version.sh ${v}, commit, and tag that commit" >&2; exit 1; }
  echo "charts/gantry and config/manager name ${v}"
  exit 0
fi
sed -i "s/^version: .*/version: ${v#v}/; s/^appVersion: .*/appVersion: \"${v}\"/" charts/gantry/Chart.yaml
sed -i "s/^\( *newTag:\) .*/\1 ${v}/" config/manager/kustomization.yaml
echo "charts/gantry and config/manager now name ${v}"
