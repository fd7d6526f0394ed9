// SVG helpers shared by the explorer's charts.

const SVG = "http://www.w3.org/2000/svg";

export function element(name, attributes) {
  const node = document.createElementNS(SVG, name);
  for (const [key, value] of Object.entries(attributes)) node.setAttribute(key, value);
  return node;
}

// Vertical grid lines with labels above them at top, every "nice" multiple (1, 2, 5 × 10^k) of
// unit that makes about eight of them up to horizon; x maps a value to its abscissa.
export function axis(x, horizon, height, top, unit, suffix) {
  const group = element("g", {class: "axis"});
  const step = niceStep(horizon / unit / 8) * unit;
  for (let t = 0; t <= horizon; t += step) {
    group.append(element("line", {x1: x(t), x2: x(t), y1: top - 6, y2: height, class: "tick"}));
    const label = element("text", {x: x(t) + 2, y: top - 10, class: "tick-label"});
    label.textContent = `${Number((t / unit).toPrecision(6))} ${suffix}`;
    group.append(label);
  }
  return group;
}

function niceStep(raw) {
  const power = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw);
}
