#!/usr/bin/env bash
# Fetches GitHub's published API descriptions, which the GitHub simulator's conformance
# test validates against, into a versioned cache directory (never committed):
#
#   @octokit/openapi          GitHub's OpenAPI 3.0 description of the REST API
#   @octokit/webhooks-schemas JSON Schemas of the webhook payloads
#
# Both come from the npm registry with npm; nothing else is downloaded. A directory that
# is already complete is not fetched again. The last line printed is that directory,
# ready for GANTRY_OCTOKIT_DIR.
#
#   hack/octokit-schemas.sh            fetch what is missing, print the directory
#   hack/octokit-schemas.sh --print    print the directory only (fetches nothing)
set -euo pipefail

OPENAPI_VERSION=23.0.2
WEBHOOKS_SCHEMAS_VERSION=7.6.1

cache_root="${XDG_CACHE_HOME:-$HOME/.cache}/gantry/octokit"
out="${cache_root}/openapi${OPENAPI_VERSION}-webhooks-schemas${WEBHOOKS_SCHEMAS_VERSION}"

if [[ "${1:-}" == "--print" ]]; then
  echo "${out}"
  exit 0
fi

log() { printf '[octokit-schemas %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

openapi="${out}/node_modules/@octokit/openapi/generated/api.github.com.json"
webhooks="${out}/node_modules/@octokit/webhooks-schemas/schema.json"
if [[ -s "${openapi}" && -s "${webhooks}" ]]; then
  log "@octokit/openapi ${OPENAPI_VERSION}, @octokit/webhooks-schemas ${WEBHOOKS_SCHEMAS_VERSION}: cached"
  echo "${out}"
  exit 0
fi

command -v npm >/dev/null || { log "npm is required (Debian: apt-get install npm)"; exit 1; }

# Install into a scratch directory and move it into place only when complete, so an
# interrupted run never leaves a half-filled cache that looks finished.
tmp="$(mktemp -d "${cache_root}.tmp.XXXXXX" 2>/dev/null || { mkdir -p "${cache_root}"; mktemp -d "${cache_root}/tmp.XXXXXX"; })"
trap 'rm -rf "${tmp}"' EXIT
log "fetching @octokit/openapi ${OPENAPI_VERSION} and @octokit/webhooks-schemas ${WEBHOOKS_SCHEMAS_VERSION} with npm"
echo '{"name":"gantry-octokit-schemas","private":true}' >"${tmp}/package.json"
npm install --prefix "${tmp}" --no-save --no-audit --no-fund --ignore-scripts --loglevel=error \
  "@octokit/openapi@${OPENAPI_VERSION}" "@octokit/webhooks-schemas@${WEBHOOKS_SCHEMAS_VERSION}" >&2
[[ -s "${tmp}/node_modules/@octokit/openapi/generated/api.github.com.json" ]] || { log "npm did not install the OpenAPI description"; exit 1; }
[[ -s "${tmp}/node_modules/@octokit/webhooks-schemas/schema.json" ]] || { log "npm did not install the webhook schemas"; exit 1; }

mkdir -p "${cache_root}"
rm -rf "${out}"
mv "${tmp}" "${out}"
trap - EXIT
echo "${out}"
