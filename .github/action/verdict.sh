#!/usr/bin/env bash
# The Action's last step: fail the job unless the gate's verdict was passed (exit 0).
set -u
code="${EXIT_CODE:-}"
verdict="${VERDICT:-none}"
if [ -z "$code" ]; then
  echo "ERROR: the conformance gate reported no exit status (see the step above)"
  exit 3
fi
if [ "$code" != "0" ]; then
  echo "conformance verdict: $verdict (exit $code): the reports are in the uploaded artifact"
  exit "$code"
fi
echo "conformance verdict: $verdict"
