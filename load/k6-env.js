// The environment of the k6 scripts (k6-flashcrowd.js, k6-autopilot.js): read and checked once,
// with a clear error naming the variable.

/** The variable, or the fallback when it is unset or empty. */
export const env = (name, fallback) => {
  const v = __ENV[name];
  return v === undefined || v === '' ? fallback : v;
};

/** A number from the environment; `required` (a sentence) makes it mandatory when no fallback. */
export function number(name, fallback, { min = 0, integer = false, required = '' } = {}) {
  const raw = env(name, fallback === undefined ? undefined : String(fallback));
  if (raw === undefined) throw new Error(`${name} is required${required ? ` (${required})` : ''}`);
  const v = Number(raw);
  if (!Number.isFinite(v) || v < min || (integer && !Number.isInteger(v))) {
    throw new Error(`${name}: expected ${integer ? 'a whole number' : 'a number'} >= ${min}, got "${raw}"`);
  }
  return v;
}

/** BASE: one URL or comma-separated URLs of several instances, without trailing slashes. */
export function bases() {
  return env('BASE', 'http://127.0.0.1:8080')
    .split(',')
    .map((s) => s.trim().replace(/\/+$/, ''))
    .filter(Boolean);
}
