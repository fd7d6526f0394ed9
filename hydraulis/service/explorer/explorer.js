// The plan explorer: the form → /v1 calls → the proposal, then a sampled step's comparison
// and 1F1B timeline, and every rank's memory under a strategy of the proposal (or a SPEC typed
// in). The bearer token lives only in the password input (sent as a header).

import {ApiError, call} from "./api.js";
import {formatBytes, formatInt, formatMs, schemeLabel, strategyLabel, strategySpec} from "./format.js";
import {renderGantt} from "./gantt.js";
import {PARTS, renderMemory} from "./memory.js";

const $ = (id) => document.getElementById(id);
const state = {space: null, documents: null, proposal: null};

// Per API call, the input that each error field names (the field's first segment, e.g.
// "lengths[3]" → "lengths"); a field not listed is shown under the form. "@cluster": the
// proposal's strategy choice when a proposal is shown (its values were sent), else the form's input.
const FIELDS = {
  presets: {},
  analytic: {model: "model", device: "device", devices: "devices", devices_per_node: "devices-per-node"},
  synthetic: {docs: "docs", lengths: "docs", seed: "lengths-seed", tail_share: "tail-share",
    tail_start: "tail-start"},
  proposal: {devices: "devices", devices_per_node: "devices-per-node", token_budget: "token-budget",
    max_seq_len: "max-seq-len", strategies: "strategies", time_limit_s: "time-limit",
    lengths: "@lengths", histogram: "@lengths", scheme_space: "@space"},
  comparison: {seed: "step-seed", lengths: "@lengths", histogram: "@lengths", scheme_space: "@space",
    devices: "devices", token_budget: "token-budget", max_seq_len: "max-seq-len"},
  memory: {strategy: "memory-spec", tokens: "memory-tokens", device: "device", model: "@cluster",
    devices: "@cluster", devices_per_node: "@cluster", optimizer_layout: "@cluster"},
};

class FieldError extends Error {
  constructor(input, message) {
    super(message);
    this.input = input;
  }
}

function start() {
  $("plan-form").addEventListener("submit", propose);
  $("sample-step").addEventListener("click", sampleStep);
  $("proposal-file").addEventListener("change", loadProposal);
  $("memory-strategy").addEventListener("change", chooseStrategy);
  $("show-memory").addEventListener("click", showMemory);
  $("token").addEventListener("change", () => loadPresets().catch(showError));
  for (const name of ["space-source", "lengths-source"]) {
    for (const radio of document.querySelectorAll(`input[name="${name}"]`)) {
      radio.addEventListener("change", showSources);
    }
  }
  showSources();
  loadPresets().catch(showError);
}

function showSources() {
  const chosen = new Set([choice("space-source"), choice("lengths-source")]);
  for (const field of document.querySelectorAll("[data-source]")) field.hidden = !chosen.has(field.dataset.source);
}

function choice(name) {
  return document.querySelector(`input[name="${name}"]:checked`).value;
}

async function api(kind, method, path, body) {
  try {
    return await call(method, path, body, $("token").value.trim());
  } catch (error) {
    if (error instanceof ApiError) error.kind = kind;
    throw error;
  }
}

async function loadPresets() {
  clearError("token");
  const presets = await api("presets", "GET", "/v1/presets");
  fill($("model"), Object.keys(presets.models), "llama-7b");
  fill($("device"), Object.keys(presets.devices), "h100-80g");
  return presets;
}

function fill(select, names, preferred) {
  const current = select.value || preferred;
  select.replaceChildren(...names.map((name) => new Option(name, name)));
  select.value = names.includes(current) ? current : names[0];
}

async function propose(event) {
  event.preventDefault();
  clearErrors();
  await busy(async () => {
    status("Building the scheme space…");
    const space = await schemeSpace();
    status("Drawing the document lengths…");
    const documents = await documentLengths();
    status("Proposing strategies…");
    const started = performance.now();
    const proposal = await api("proposal", "POST", "/v1/proposals", {
      scheme_space: space, devices: numberOf("devices"), devices_per_node: numberOf("devices-per-node"),
      token_budget: numberOf("token-budget"), max_seq_len: numberOf("max-seq-len"), lengths: documents,
      strategies: numberOf("strategies"), time_limit_s: numberOf("time-limit"),
    });
    Object.assign(state, {space, documents, proposal});
    showProposal(proposal);
    $("step").hidden = true;
    status(`Proposal of ${proposal.strategies.length} strategies in ${((performance.now() - started) / 1e3).toFixed(1)} s.`);
  });
}

async function schemeSpace() {
  if (choice("space-source") === "upload") {
    const file = $("scheme-space").files[0];
    if (!file) throw new FieldError("scheme-space", "choose a scheme-space JSON file");
    try {
      return JSON.parse(await file.text());
    } catch (error) {
      throw new FieldError("scheme-space", `${file.name} is not JSON (${error.message})`);
    }
  }
  if (!$("model").value || !$("device").value) await loadPresets();
  return api("analytic", "POST", "/v1/scheme-spaces/analytic", {
    model: $("model").value, device: $("device").value, devices: numberOf("devices"),
    devices_per_node: numberOf("devices-per-node"),
  });
}

async function documentLengths() {
  if (choice("lengths-source") === "file") {
    const file = $("lengths-file").files[0];
    if (!file) throw new FieldError("lengths-file", "choose a lengths file");
    return parseLengths(file.name, await file.text());
  }
  const drawn = await api("synthetic", "POST", "/v1/lengths/synthetic", {
    docs: numberOf("docs"), seed: numberOf("lengths-seed"), tail_share: numberOf("tail-share"),
    tail_start: numberOf("tail-start"),
  });
  return drawn.lengths;
}

// One positive integer per line; blank lines and lines starting with # are skipped (as
// hydraulis.artifacts.lengths reads a text lengths file).
function parseLengths(name, text) {
  const lengths = [];
  const lines = text.split(/\r?\n/);
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i].trim();
    if (!line || line.startsWith("#")) continue;
    if (!/^\d+$/.test(line) || Number(line) <= 0) {
      throw new FieldError("lengths-file", `${name}:${i + 1}: ${JSON.stringify(line.slice(0, 40))} is not a positive integer`);
    }
    lengths.push(Number(line));
  }
  if (!lengths.length) throw new FieldError("lengths-file", `${name} holds no lengths`);
  return lengths;
}

async function loadProposal() {
  const file = $("proposal-file").files[0];
  if (!file) return;
  clearErrors();
  await busy(async () => {
    let proposal;
    try {
      proposal = JSON.parse(await file.text());
    } catch (error) {
      throw new FieldError("proposal-file", `${file.name} is not JSON (${error.message})`);
    }
    if (!proposal || proposal.kind !== "proposal" || !Array.isArray(proposal.strategies)) {
      throw new FieldError("proposal-file", `${file.name} is not a proposal (hydraulis propose … -o writes one)`);
    }
    Object.assign(state, {space: null, documents: null, proposal});
    showProposal(proposal);
    $("step").hidden = true;
    status(`Proposal of ${proposal.strategies.length} strategies from ${file.name}.`);
  });
}

function chooseStrategy() {
  const index = $("memory-strategy").value;
  if (index !== "" && state.proposal) $("memory-spec").value = strategySpec(state.proposal.strategies[Number(index)]);
}

async function showMemory() {
  clearErrors();
  await busy(async () => {
    const strategy = $("memory-spec").value.trim();
    if (!strategy) throw new FieldError("memory-spec", "type a strategy SPEC or choose a strategy of the proposal");
    if (!$("device").value) await loadPresets();
    const proposal = state.proposal;
    const cluster = proposal
      ? {model: proposal.model.name, devices: proposal.devices, devices_per_node: proposal.devices_per_node,
        optimizer_layout: proposal.optimizer_layout}
      : {model: $("model").value, devices: numberOf("devices"), devices_per_node: numberOf("devices-per-node")};
    status(`Accounting every rank's memory under ${strategy}…`);
    const report = await api("memory", "POST", "/v1/memory", {
      ...cluster, strategy, device: $("device").value, tokens: numberOf("memory-tokens"),
    });
    showMemoryReport(report);
    status(`Memory of ${formatInt(report.devices)} ranks under ${report.strategy}.`);
  });
}

function showMemoryReport(report) {
  const layout = report.optimizer_layout;
  const tokens = [...new Set(report.tokens)].map(formatInt).join("/");
  const share = (bytes) => `${((100 * bytes) / report.capacity_bytes).toFixed(0)}%`;
  $("memory-summary").textContent =
    `${report.model.name} under ${report.strategy} on ${formatInt(report.devices)} × ${report.device}, optimizer ` +
    `layout dp${layout.dp}·tp${layout.tp}·pp${layout.pp}; micro-batches of ${tokens} tokens; ` +
    `${report.classes.length} rank classes. The fullest rank holds ${formatBytes(report.max_total_bytes)}, ` +
    `${share(report.max_total_bytes)} of the ${formatBytes(report.capacity_bytes)} capacity; the cost model ` +
    `predicts ${formatBytes(report.max_predicted_bytes)}.`;
  $("memory-view").hidden = false;
  const classes = renderMemory($("memory-chart"), report);
  $("memory-chart").setAttribute("aria-label", `Memory of ${classes.length} rank classes`);
  $("memory-table").tBodies[0].replaceChildren(...classes.map(({label, first}) => row([
    label, ...PARTS.map((part) => formatBytes(first[part.key])), formatBytes(first.total_bytes),
    formatBytes(first.predicted_bytes), share(first.total_bytes),
  ])));
}

async function sampleStep() {
  if (!state.proposal) return;
  clearErrors();
  await busy(async () => {
    status("Planning a sampled step with every contender…");
    const comparison = await api("comparison", "POST", "/v1/step-comparisons", {
      scheme_space: state.space, proposal: state.proposal, lengths: state.documents, seed: numberOf("step-seed"),
    });
    showStep(comparison);
    status(`Step with seed ${comparison.seed}: predicted ${formatMs(comparison.plan.predicted_ms)} ms.`);
  });
}

function showProposal(proposal) {
  const layout = proposal.optimizer_layout;
  const solver = proposal.solver;
  $("proposal-summary").textContent =
    `${proposal.strategies.length} strategies for ${formatInt(proposal.devices)} devices ` +
    `(${proposal.devices_per_node} per node), ${formatInt(proposal.token_budget)} tokens per step, ` +
    `sequences up to ${formatInt(proposal.max_seq_len)} tokens. Optimizer layout dp${layout.dp}·tp${layout.tp}·pp${layout.pp}; ` +
    `solver ${solver.status} (${solver.solver}, ${formatMs(solver.wall_ms)} ms).`;
  $("strategies-table").tBodies[0].replaceChildren(...proposal.strategies.map((s, i) => row([
    String(i), strategyLabel(s), formatInt(s.devices), `(${formatInt(s.serves_from)}, ${formatInt(s.serves_to)}]`,
    formatMs(s.predicted_ms), formatMs(s.reduce_ms),
    s.pipelines.map((g, k) => `${g.count}×${schemeLabel(g.scheme)}: ${formatBytes(s.headroom_bytes[k])}`).join("; "),
  ])));
  $("memory-strategy").replaceChildren(new Option("none: type a SPEC", ""),
    ...proposal.strategies.map((s, i) => new Option(`${i}: ${strategyLabel(s)}`, String(i))));
  $("memory-strategy").value = "0";
  chooseStrategy();
  $("step-controls").hidden = !state.space;
  $("explanation").textContent = [proposal.explanation, ...proposal.strategies.map((s, i) => `${i}: ${s.explanation}`)]
    .filter(Boolean).join("\n");
  $("proposal").hidden = false;
}

function showStep(comparison) {
  const plan = comparison.plan;
  const strategy = plan.synthesis ?? state.proposal.strategies[plan.strategy_index];
  const which = plan.synthesis ? "a strategy made for the step" : `strategy ${plan.strategy_index}`;
  const longest = comparison.lengths.reduce((most, s) => Math.max(most, s), 0);
  $("step-summary").textContent =
    `${formatInt(comparison.lengths.length)} sequences, ${formatInt(comparison.tokens)} tokens, the longest ` +
    `${formatInt(longest)}. Hydraulis runs ${which}: ${strategyLabel(strategy)} with ` +
    `${plan.method}; predicted ${formatMs(plan.predicted_ms)} ms (its lower bound ${formatMs(plan.lower_bound_ms)} ms, ` +
    `work bound ${formatMs(comparison.work_bound_ms)} ms), planned in ${formatMs(plan.planning_ms)} ms.` +
    (plan.notes.length ? ` Notes: ${plan.notes.join("; ")}.` : "");
  $("contenders-table").tBodies[0].replaceChildren(...comparison.contenders.map((c) => row([
    c.label, c.strategy, formatMs(c.predicted_ms), formatMs(c.lower_bound_ms),
    c.name === "hydraulis" ? "—" : `${c.speedup.toFixed(2)}×`,
  ], c.name)));
  $("step").hidden = false;
  renderGantt($("gantt"), $("op-details"), comparison);
}

function row(cells, name) {
  const tr = document.createElement("tr");
  if (name) tr.dataset.contender = name;
  for (const text of cells) {
    const td = document.createElement("td");
    td.textContent = text;
    tr.append(td);
  }
  return tr;
}

// The value of a number input as sent to the API: "" → null, so that the service names the field.
function numberOf(id) {
  const text = $(id).value.trim();
  return text === "" ? null : Number(text);
}

async function busy(work) {
  const buttons = [$("propose"), $("sample-step"), $("show-memory")];
  for (const button of buttons) button.disabled = true;
  $("plan-form").setAttribute("aria-busy", "true");
  try {
    await work();
  } catch (error) {
    status("");
    showError(error);
  } finally {
    for (const button of buttons) button.disabled = false;
    $("plan-form").removeAttribute("aria-busy");
  }
}

function status(text) {
  $("status").textContent = text;
}

function showError(error) {
  const input = errorInput(error);
  const message = error.message || String(error);
  if (input && $(`${input}-error`) && !$(input).closest("[hidden]")) {
    $(`${input}-error`).textContent = message;
    $(input).setAttribute("aria-invalid", "true");
    $(input).focus();
  } else {
    $("form-error").textContent = message;
  }
}

function errorInput(error) {
  if (error instanceof FieldError) return error.input;
  if (!(error instanceof ApiError)) return null;
  if (error.status === 401) return "token";
  if (!error.field) return null;
  const field = error.field.split(/[.[:\s]/)[0];
  const target = (FIELDS[error.kind] || {})[field];
  if (target === "@cluster") return state.proposal ? "memory-strategy" : FIELDS.analytic[field];
  if (target === "@space") return choice("space-source") === "upload" ? "scheme-space" : "model";
  if (target === "@lengths") return choice("lengths-source") === "file" ? "lengths-file" : "docs";
  return target || null;
}

function clearError(input) {
  $(`${input}-error`).textContent = "";
  $(input).removeAttribute("aria-invalid");
}

function clearErrors() {
  for (const message of document.querySelectorAll(".field-error")) {
    const input = message.id.replace(/-error$/, "");
    clearError(input);
  }
  $("form-error").textContent = "";
}

start();
