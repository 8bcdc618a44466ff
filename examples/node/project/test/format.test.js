import { test } from "node:test";
import assert from "node:assert/strict";
import { formatDuration, parseDuration } from "../src/duration.js";

test("whole units", () => {
  assert.equal(formatDuration(0), "0s");
  assert.equal(formatDuration(90), "1m30s");
  assert.equal(formatDuration(5400), "1h30m");
});

test("days for a day or more", () => {
  assert.equal(formatDuration(86400), "1d");
  assert.equal(formatDuration(93600), "1d2h");
  assert.equal(parseDuration("1d"), 86400);
});
