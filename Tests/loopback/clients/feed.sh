#!/bin/sh
# A client that keeps a feed fresh for about 30 s, in one of two ways (Scenarios/radio-polling.yaml):
#   feed.sh poll 3    fetch the feed every 3 s, ten times (the radio never sleeps)
#   feed.sh batch 14  wait 14 s, fetch; wait 14 s, fetch (two batches; the radio sleeps between)
# Each fetch prints "fetched N" on stderr; a failed fetch ends the client with curl's code.
mode=$1 gap=$2
fetch() { curl -fsS -o /dev/null "$NETCOND_URL" || exit $?; echo "fetched $1" >&2; }
case $mode in
poll) for i in 1 2 3 4 5 6 7 8 9 10; do fetch "$i"; sleep "$gap"; done ;;
batch) sleep "$gap"; fetch 1; sleep "$gap"; fetch 2 ;;
*) echo "usage: feed.sh poll|batch SECONDS" >&2; exit 2 ;;
esac
