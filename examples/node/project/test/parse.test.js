import { test } from "node:test";
import assert from "node:assert/strict";
import { parseDuration } from "../src/duration.js";

test("a single unit", () => {
  assert.equal(parseDuration("90s"), 90);
  assert.equal(parseDuration("15m"), 900);
  assert.equal(parseDuration("2h"), 7200);
});

test("several units add up", () => {
  assert.equal(parseDuration("1h30m"), 5400);
  assert.equal(parseDuration("1m30s"), 90);
});

test("anything else is refused", () => {
  assert.throws(() => parseDuration("soon"), /not a duration/);
  assert.throws(() => parseDuration(""), /not a duration/);
});
