#!/bin/sh
# The project's test: greet.sh must greet correctly.
out=$(sh greet.sh Ada)
if [ "$out" = "Hello, Ada!" ]; then
  echo "ok: $out"
else
  echo "FAIL: expected 'Hello, Ada!', got '$out'"
  exit 1
fi
