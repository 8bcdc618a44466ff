// Durations written like `90s`, `15m` or `1h30m`, in seconds.

const UNITS = { h: 3600, m: 60, s: 1 };

/** The seconds in `text` (`"1h30m"` is 5400); throws on anything else. */
export function parseDuration(text) {
  const match = /^(\d+)([hms])$/.exec(text.trim());
  if (!match) {
    throw new Error(`not a duration: ${JSON.stringify(text)}`);
  }
  return Number(match[1]) * UNITS[match[2]];
}

/** `seconds` written back as a duration: 5400 is `"1h30m"`, 0 is `"0s"`. */
export function formatDuration(seconds) {
  if (seconds === 0) {
    return "0s";
  }
  let out = "";
  for (const [unit, size] of Object.entries(UNITS)) {
    const count = Math.floor(seconds / size);
    if (count > 0) {
      out += `${count}${unit}`;
      seconds -= count * size;
    }
  }
  return out;
}
