// How the explorer writes numbers and layouts (the same words as the CLI's tables).

const integers = new Intl.NumberFormat("en-US", {maximumFractionDigits: 0});

export function formatInt(value) {
  return integers.format(value);
}

export function formatMs(value) {
  const digits = Math.abs(value) >= 100 ? 0 : Math.abs(value) >= 10 ? 1 : 2;
  return value.toFixed(digits);
}

export function formatBytes(bytes) {
  const gib = bytes / 2 ** 30;
  return Math.abs(gib) >= 1 ? `${gib.toFixed(1)} GiB` : `${(bytes / 2 ** 20).toFixed(0)} MiB`;
}

// (cp,tp,pp) with the non-default options, e.g. (1,8,1)[sp,recompute=full].
export function schemeLabel(scheme) {
  const options = [];
  if (scheme.sp) options.push("sp");
  if (scheme.recompute && scheme.recompute !== "none") options.push(`recompute=${scheme.recompute}`);
  return `(${scheme.cp},${scheme.tp},${scheme.pp})${options.length ? `[${options.join(",")}]` : ""}`;
}

// A proposal strategy as Python prints it: 1×(1,16,1) + 6×(1,8,1).
export function strategyLabel(strategy) {
  return strategy.pipelines.map((g) => `${g.count}×${schemeLabel(g.scheme)}`).join(" + ");
}
