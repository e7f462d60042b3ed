#!/usr/bin/env bash
# The Action's gate step (action.yml). Inputs arrive as environment variables, never
# interpolated into the script text, so no input is ever executed as shell; the API key
# arrives only as CONFORMANCE_API_KEY, which the suite reads and redacts everywhere.
# Always exits 0: the verdict's exit status goes to $GITHUB_OUTPUT (exit-code=), so that
# the reports are uploaded before the Action's last step fails the job on it.
set -uo pipefail

args=(
  --target-url "${TARGET_URL:?target-url is required}"
  --model "${MODEL:?model is required}"
  --spec "${SPEC:-aihubmix}"
  --shards "${SHARDS:-1}"
  --report-dir "${REPORT_DIR:-conformance-report}"
)
if [ -n "${BASELINE:-}" ]; then args+=(--baseline "$BASELINE"); fi
if [ -n "${REQUIRE_CAPABILITIES:-}" ]; then
  args+=(--require-capabilities "$REQUIRE_CAPABILITIES")
fi
# Further suite options, as one string: the gate splits it as a shell splits a command line
# (quotes respected: --header 'X-Team: my team' is two words), never expanding anything.
python -m conformance gate "${args[@]}" "--args=${EXTRA_ARGS:-}"
code=$?
# A gate that crashed wrote no exit-code= line: say so, so that the job still fails.
if ! grep -q '^exit-code=' "${GITHUB_OUTPUT:-/dev/null}" 2>/dev/null; then
  echo "exit-code=$code" >> "${GITHUB_OUTPUT:-/dev/null}"
fi
exit 0
