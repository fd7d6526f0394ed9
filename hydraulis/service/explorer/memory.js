// Per-rank memory of a strategy (POST /v1/memory, hydraulis memory) as an SVG bar chart: one
// bar per rank class (ranks that build the same objects), its weights, gradients, optimizer
// buffer, route and activations stacked, a tick at the cost model's prediction for the class, a
// dashed line at the device's capacity (its memory less the runtime's overhead and the safety
// margin) and a solid one at its whole memory. Each part names its bytes on hover; the table
// beside the chart holds the same numbers for the keyboard and screen readers.

import {formatBytes} from "./format.js";
import {axis, element} from "./svg.js";

const ROW = 22;
const BAR = 14;
const LABEL = 230;
const AXIS = 26;
const MIN_WIDTH = 640;
const GIB = 2 ** 30;

export const PARTS = [
  {key: "weights_bytes", name: "weights"},
  {key: "grad_bytes", name: "gradients"},
  {key: "optimizer_bytes", name: "optimizer"},
  {key: "route_bytes", name: "route"},
  {key: "activation_bytes", name: "activations"},
];

// One entry per class: its ranks, their label and the bytes of its first rank (every rank of a
// class has the same parts up to an element or a block of its route).
export function memoryClasses(report) {
  return report.classes.map((ranks) => {
    const first = report.ranks[ranks[0]];
    const place = first.stage === null ? "idle" : `p${first.pipeline} s${first.stage}`;
    return {ranks, first, label: `${rankRuns(ranks)} · ${place}`};
  });
}

export function renderMemory(container, report) {
  const classes = memoryClasses(report);
  const most = classes.reduce((m, c) => Math.max(m, c.first.total_bytes, c.first.predicted_bytes),
    report.device_memory_bytes);
  const horizon = most * 1.02;
  const width = Math.max(MIN_WIDTH, container.clientWidth - LABEL - 48);
  const x = (bytes) => LABEL + (bytes / horizon) * width;
  const height = AXIS + classes.length * ROW + 8;

  const svg = element("svg", {width: LABEL + width + 32, height, class: "memory"});
  svg.append(axis(x, horizon, height, AXIS, GIB, "GiB"));
  classes.forEach((entry, r) => svg.append(bar(entry, AXIS + r * ROW, x)));
  svg.append(limit(x(report.capacity_bytes), height, "capacity",
    `capacity ${formatBytes(report.capacity_bytes)}: what the device leaves to states and activations`));
  svg.append(limit(x(report.device_memory_bytes), height, "device-memory",
    `device memory ${formatBytes(report.device_memory_bytes)}`));
  container.replaceChildren(svg);
  return classes;
}

function bar(entry, y, x) {
  const group = element("g", {class: "class", "data-ranks": entry.ranks.length});
  const {first} = entry;
  const title = element("title", {});
  title.textContent = `${entry.label}: ${formatBytes(first.total_bytes)} of which ` +
    PARTS.map((part) => `${part.name} ${formatBytes(first[part.key])}`).join(", ") +
    `; cost model ${formatBytes(first.predicted_bytes)}`;
  group.append(title);
  const label = element("text", {x: 6, y: y + ROW - 7, class: "row-label"});
  label.textContent = entry.label;
  group.append(label);
  let start = 0;
  for (const part of PARTS) {
    const bytes = first[part.key];
    if (bytes > 0) {
      const rect = element("rect", {x: x(start), y: y + (ROW - BAR) / 2, width: Math.max(0.75, x(start + bytes) - x(start)),
        height: BAR, class: `part ${part.name}`, "data-part": part.name});
      const hover = element("title", {});
      hover.textContent = `${entry.label}: ${part.name} ${formatBytes(bytes)}`;
      rect.append(hover);
      group.append(rect);
    }
    start += bytes;
  }
  const predicted = x(first.predicted_bytes);
  group.append(element("line", {x1: predicted, x2: predicted, y1: y + 1, y2: y + ROW - 1, class: "predicted"}));
  return group;
}

function limit(at, height, kind, text) {
  const line = element("line", {x1: at, x2: at, y1: AXIS - 4, y2: height, class: kind});
  const title = element("title", {});
  title.textContent = text;
  line.append(title);
  return line;
}

// 0-7,16-23: runs of consecutive ranks, at most four shown (as hydraulis memory's table).
export function rankRuns(ranks) {
  const runs = [];
  for (const rank of ranks) {
    const last = runs[runs.length - 1];
    if (last && rank === last[1] + 1) last[1] = rank;
    else runs.push([rank, rank]);
  }
  const text = runs.slice(0, 4).map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`)).join(",");
  return runs.length > 4 ? `${text},… (${ranks.length})` : text;
}
