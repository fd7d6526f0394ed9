// The 1F1B timeline of a step plan as an SVG Gantt chart: one row per pipeline stage, one bar
// per forward (light) and backward (dark) of each micro-batch, one colour per micro-batch; the
// dashed line marks the end of the slowest pipeline. Pointer hover and the keyboard (arrow keys,
// Home, End, Escape) select an operation; its details appear beside it.

import {formatMs, formatInt, schemeLabel} from "./format.js";
import {axis, element} from "./svg.js";

const ROW = 18;
const BAR = 13;
const LABEL = 190;
const AXIS = 26;
const MIN_WIDTH = 720;
const SEQUENCES_SHOWN = 12;

export function renderGantt(container, details, comparison) {
  const {rows, ops} = layout(comparison);
  const pipelines = comparison.plan.pipelines;
  const slowest = pipelines.reduce((most, p) => Math.max(most, p.predicted_ms), 0);
  const horizon = ops.reduce((most, op) => Math.max(most, op.end), Math.max(slowest, 1e-9)) * 1.02;
  const width = Math.max(MIN_WIDTH, container.clientWidth - LABEL - 64);
  const x = (ms) => LABEL + (ms / horizon) * width;
  const height = AXIS + rows.length * ROW + 8;

  const svg = element("svg", {width: LABEL + width + 48, height, class: "gantt"});
  svg.append(axis(x, horizon, height, AXIS, 1, "ms"));
  rows.forEach((row, r) => {
    const y = AXIS + r * ROW;
    if (r % 2 === 1) svg.append(element("rect", {x: 0, y, width: LABEL + width, height: ROW, class: "band"}));
    const label = element("text", {x: 6, y: y + ROW - 5, class: "row-label"});
    label.textContent = row.label;
    svg.append(label);
  });
  ops.forEach((op, i) => {
    const hue = (op.microBatch * 137.508) % 360;
    const light = op.phase === "F" ? 76 : 42;
    svg.append(element("rect", {
      x: x(op.start), y: AXIS + op.row * ROW + (ROW - BAR) / 2, width: Math.max(0.75, x(op.end) - x(op.start)),
      height: BAR, class: `op ${op.phase === "F" ? "forward" : "backward"}`, "data-op": i,
      fill: `hsl(${hue.toFixed(1)} 62% ${light}%)`,
    }));
  });
  svg.append(element("line", {x1: x(slowest), x2: x(slowest), y1: AXIS - 4, y2: height, class: "slowest"}));

  container.replaceChildren(svg);
  container.setAttribute("aria-label",
    `Timeline of ${pipelines.length} pipelines, ${rows.length} stages, ${ops.length} operations`);
  const chart = {container, details, comparison, rows, ops, x, selected: -1};
  wire(chart);
  return chart;
}

function layout(comparison) {
  const rows = [];
  const ops = [];
  comparison.plan.pipelines.forEach((pipeline, p) => {
    const first = rows.length;
    for (let s = 0; s < pipeline.scheme.pp; s++) {
      rows.push({pipeline: p, stage: s, label: `p${p} ${schemeLabel(pipeline.scheme)} s${s}`, ops: []});
    }
    const columns = comparison.timelines[p].ops;
    for (let i = 0; i < columns.stage.length; i++) {
      const row = first + columns.stage[i];
      rows[row].ops.push(ops.length);
      ops.push({pipeline: p, stage: columns.stage[i], microBatch: columns.micro_batch[i], phase: columns.phase[i],
        start: columns.start_ms[i], end: columns.end_ms[i], row});
    }
  });
  for (const row of rows) row.ops.sort((a, b) => ops[a].start - ops[b].start);
  return {rows, ops};
}

function wire(chart) {
  const {container, details} = chart;
  container.onmouseover = (event) => {
    const index = event.target.dataset && event.target.dataset.op;
    if (index !== undefined) select(chart, Number(index));
  };
  container.onmouseleave = () => {
    if (document.activeElement !== container) hide(chart);
  };
  container.onfocus = () => {
    if (chart.selected < 0 && chart.ops.length) select(chart, chart.rows.find((r) => r.ops.length).ops[0], true);
  };
  container.onblur = () => hide(chart);
  container.onkeydown = (event) => {
    const next = move(chart, event.key);
    if (next === null) return;
    event.preventDefault();
    if (next >= 0) select(chart, next, true);
  };
  details.hidden = true;
}

// The operation a key leads to from the selected one; null for keys the chart does not use.
function move(chart, key) {
  const {rows, ops} = chart;
  if (key === "Escape") {
    hide(chart);
    return -1;
  }
  if (!["ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown", "Home", "End"].includes(key)) return null;
  if (chart.selected < 0) return rows.find((r) => r.ops.length).ops[0];
  const current = ops[chart.selected];
  const row = rows[current.row].ops;
  const at = row.indexOf(chart.selected);
  if (key === "ArrowLeft") return row[Math.max(0, at - 1)];
  if (key === "ArrowRight") return row[Math.min(row.length - 1, at + 1)];
  if (key === "Home") return row[0];
  if (key === "End") return row[row.length - 1];
  const direction = key === "ArrowDown" ? 1 : -1;
  for (let r = current.row + direction; r >= 0 && r < rows.length; r += direction) {
    if (!rows[r].ops.length) continue;
    return rows[r].ops.reduce((best, i) =>
      Math.abs(ops[i].start - current.start) < Math.abs(ops[best].start - current.start) ? i : best);
  }
  return chart.selected;
}

function select(chart, index, fromKeyboard = false) {
  const {container, details, ops} = chart;
  const previous = container.querySelector("rect.op.selected");
  if (previous) previous.classList.remove("selected");
  const rect = container.querySelector(`rect.op[data-op="${index}"]`);
  rect.classList.add("selected");
  chart.selected = index;
  describe(chart, ops[index]);
  const left = Number(rect.getAttribute("x"));
  const top = Number(rect.getAttribute("y"));
  if (fromKeyboard) scrollIntoView(container, left, top);
  details.style.left = `${Math.max(0, Math.min(left - container.scrollLeft, container.clientWidth - 340))}px`;
  details.style.top = `${top + ROW + 2 - container.scrollTop}px`;
  details.hidden = false;
}

function hide(chart) {
  chart.details.hidden = true;
}

function scrollIntoView(container, left, top) {
  if (left < container.scrollLeft + LABEL || left > container.scrollLeft + container.clientWidth - 40) {
    container.scrollLeft = Math.max(0, left - LABEL - 40);
  }
  if (top < container.scrollTop + AXIS || top > container.scrollTop + container.clientHeight - 3 * ROW) {
    container.scrollTop = Math.max(0, top - container.clientHeight / 2);
  }
}

function describe(chart, op) {
  const pipeline = chart.comparison.plan.pipelines[op.pipeline];
  const microBatch = pipeline.micro_batches[op.microBatch];
  const stageMs = chart.comparison.timelines[op.pipeline].micro_batch_ms[op.microBatch];
  const shown = microBatch.sequences.slice(0, SEQUENCES_SHOWN)
    .map((s, i) => `#${s} (${formatInt(microBatch.lengths[i])})`).join(", ");
  const more = microBatch.sequences.length > SEQUENCES_SHOWN
    ? `, … ${microBatch.sequences.length - SEQUENCES_SHOWN} more` : "";
  const lines = [
    `Pipeline ${op.pipeline} ${schemeLabel(pipeline.scheme)}, stage ${op.stage}`,
    `${op.phase === "F" ? "Forward" : "Backward"} of micro-batch ${op.microBatch}: ` +
      `${formatMs(op.start)} → ${formatMs(op.end)} ms (${formatMs(op.end - op.start)} ms)`,
    `Micro-batch ${op.microBatch}: ${microBatch.sequences.length} sequences, ${formatInt(microBatch.tokens)} tokens, ` +
      `predicted ${formatMs(stageMs)} ms per stage (forward + backward)`,
    `Sequences (tokens): ${shown}${more}`,
  ];
  chart.details.replaceChildren(...lines.map((line) => {
    const p = document.createElement("p");
    p.textContent = line;
    return p;
  }));
}
