#!/usr/bin/env bash
# One command from a fresh Debian 12 machine to a running sandboxd:
# installs what is missing, builds and installs sandboxd, builds the
# default image if absent, prints an identity token and a ready-to-paste
# example, and runs sandboxd in the foreground on 127.0.0.1:7070.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh

STATE=${SANDBOXD_STATE:-/var/lib/sandboxd}
LISTEN=${SANDBOXD_LISTEN:-127.0.0.1:7070}
URL="http://$LISTEN"

if ! sandboxd image list --state "$STATE" | awk 'NR > 1 {print $1}' | grep -qx debian; then
        sandboxd image build debian --state "$STATE"
elif sandboxd image list --state "$STATE" | awk 'NR > 1 && $1 == "debian" {print $NF}' | grep -qx older; then
        # Not rebuilt under sandboxes that may be using it: say how.
        echo "note: the debian image was built from an older recipe;" \
                "'sandboxd image build debian' rebuilds it (stop its sandboxes first)" >&2
fi

TOKEN=$(sandboxd token --state "$STATE" --url "$URL" --deployment demo --account demo --ttl 24h)
cat <<EOT

sandboxd is starting on $URL (state in $STATE).

Identity token (deployment "demo", account "demo", valid 24 h):

  export SANDBOXD_TOKEN=$TOKEN

Try it from another shell:

  H=\$(curl -s -X POST -H "Authorization: Bearer \$SANDBOXD_TOKEN" $URL/v1/sandboxes/thread-42/attach)
  CRED=\$(echo "\$H" | sed -E 's/.*"Authorization":"([^"]+)".*/\1/')
  curl -s -X POST -H "Authorization: \$CRED" -d '{"command":["python3","-c","print(2 + 2)"]}' \\
       $URL/v1/sandboxes/thread-42/exec

EOT
exec sandboxd serve --state "$STATE" --listen "$LISTEN" --url "$URL"
