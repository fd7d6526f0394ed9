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
  if (Math.abs(gib) >= 1) return `${gib.toFixed(1)} GiB`;
  return Math.abs(bytes) >= 2 ** 20 ? `${(bytes / 2 ** 20).toFixed(0)} MiB` : `${(bytes / 2 ** 10).toFixed(0)} KiB`;
}

// The non-default options of a scheme in SPEC brackets, e.g. "[sp,recompute=full:2]" ("" for none).
function optionsText(scheme) {
  const options = scheme.sp ? ["sp"] : [];
  if (scheme.recompute && scheme.recompute !== "none") {
    const layers = scheme.recompute_layers && scheme.recompute_layers.length ? `:${scheme.recompute_layers.join("/")}` : "";
    options.push(`recompute=${scheme.recompute}${layers}`);
  }
  return options.length ? `[${options.join(",")}]` : "";
}

// (cp,tp,pp) with the non-default options, e.g. (1,8,1)[sp,recompute=full].
export function schemeLabel(scheme) {
  return `(${scheme.cp},${scheme.tp},${scheme.pp})${optionsText(scheme)}`;
}

// A proposal strategy as a SPEC (hydraulis memory --strategy), e.g. 4,8,1x16+1,8,1[sp]x64.
export function strategySpec(strategy) {
  return strategy.pipelines.map((g) => `${g.scheme.cp},${g.scheme.tp},${g.scheme.pp}${optionsText(g.scheme)}x${g.count}`)
    .join("+");
}

// A proposal strategy as Python prints it: 1×(1,16,1) + 6×(1,8,1).
export function strategyLabel(strategy) {
  return strategy.pipelines.map((g) => `${g.count}×${schemeLabel(g.scheme)}`).join(" + ");
}
