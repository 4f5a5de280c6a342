// The simulator page: it keeps the settings, asks the JSON API and draws the answer.
// It computes nothing about placement itself: owners, counts, fair shares, ratios, moved keys
// and walks all come from the server, which asks the ringkit library (docs/web.md).
import { REMEDY_LABELS, failureRows, remedyRows, survivorsLine } from "./hotspots.js";
import { startLive } from "./live.js";
import { drawRing as ringView } from "./ring.js";

const state = {
  meta: null,
  nodes: [], // {name, weight, zone} in page order (the order hash % N indexes)
  vnodes: 1,
  hasher: "",
  strategy: "",
  keys: 300,
  prefix: "booking-",
  zipf: null,
  colours: new Map(), // node name -> palette index, kept while the node lives
  report: null,
  preview: null, // before any change: what adding the suggested node would move
  lookup: null,
  remedy: "none", // the hot-key remedy the bars show (none, spread, near_cache, split)
  remedies: null, // /api/remedies for the current keys (with Zipf requests only)
  failZone: null, // {zone, replicas}: the zone failed last, computed again on every refresh
  failed: null, // /api/fail_zone's answer for it
};

const $ = (id) => document.getElementById(id);

function nodeSpec(node) {
  let spec = node.name;
  if (node.weight !== 1 || node.zone) spec += `:${node.weight}`;
  if (node.zone) spec += `:${node.zone}`;
  return spec;
}

// The options the chosen strategy uses (from /api/meta): the API refuses any other.
function uses(option) {
  return (state.meta.options[state.strategy] || []).includes(option);
}

function placementParams() {
  const params = { nodes: state.nodes.map(nodeSpec).join(","), strategy: state.strategy };
  if (uses("vnodes")) params.vnodes = String(state.vnodes);
  if (uses("hasher")) params.hasher = state.hasher;
  return params;
}

async function getJSON(path, params) {
  const url = `${path}?${new URLSearchParams(params)}`;
  const response = await fetch(url);
  const body = await response.json();
  if (!response.ok) {
    const error = body.error || {};
    throw new Error(error.param ? `${error.param}: ${error.message}` : error.message);
  }
  return body;
}

function showError(error) {
  const box = $("error");
  box.textContent = error ? String(error.message || error) : "";
  box.hidden = !error;
}

// -- colours: a node keeps its colour while it lives; freed colours are reused -----------------

function colourOf(name) {
  const palette = state.meta.palette;
  if (!state.colours.has(name)) {
    const used = new Set(state.colours.values());
    let index = 0;
    while (used.has(index) && index < palette.length) index += 1;
    state.colours.set(name, index < palette.length ? index : state.colours.size % palette.length);
  }
  return palette[state.colours.get(name)];
}

function forgetColours() {
  const live = new Set(state.nodes.map((node) => node.name));
  for (const name of [...state.colours.keys()]) if (!live.has(name)) state.colours.delete(name);
}

// -- talking to the API ------------------------------------------------------------------------

// Requests in flight: tests wait for busy "false", when the page has drawn the last answer.
let pending = 0;
// A newer request of a kind supersedes an older one: an answer that arrives after a newer
// request was sent is dropped, or a slow error could come back over a fixed input.
const latest = { refresh: 0, lookup: 0, remedies: 0, failZone: 0 };

async function busyWhile(work) {
  pending += 1;
  document.body.dataset.busy = "true";
  try {
    await work();
  } finally {
    pending -= 1;
    document.body.dataset.busy = String(pending > 0);
  }
}

function refresh(change) {
  return busyWhile(() => refreshNow(change));
}

async function refreshNow(change) {
  const ticket = (latest.refresh += 1);
  const params = { ...placementParams(), keys: String(state.keys), prefix: state.prefix };
  if (state.zipf !== null) params.zipf = String(state.zipf);
  if (change) params[change.kind] = change.value;
  let report;
  let preview = null;
  try {
    report = await getJSON("/api/ring", params);
    if (!change) preview = await previewAdd(params, report);
  } catch (error) {
    if (ticket !== latest.refresh) return;
    showError(error);
    syncControls();
    return;
  }
  if (ticket !== latest.refresh) return;
  state.report = report;
  state.preview = preview;
  state.nodes = report.nodes.map(({ name, weight, zone }) => ({ name, weight, zone }));
  forgetColours();
  showError(null);
  render();
  await lookupNow();
  await remediesNow();
  await failZoneNow();
}

// The cards about movement would show "–" until a first change: before one, they show
// what adding the node the form suggests would move, as the server computes it for a real add.
async function previewAdd(params, report) {
  try {
    return (await getJSON("/api/ring", { ...params, add: suggestName(report.nodes) })).change;
  } catch {
    return null; // e.g. the page is at the node limit: no preview, and nothing for a banner
  }
}

function lookup() {
  return busyWhile(lookupNow);
}

async function lookupNow() {
  const key = $("lookup-key").value;
  if (!key) return;
  const ticket = (latest.lookup += 1);
  const params = { ...placementParams(), key, replicas: $("lookup-replicas").value };
  let found = null;
  let failure = null;
  try {
    found = await getJSON("/api/lookup", params);
  } catch (error) {
    failure = error;
  }
  if (ticket !== latest.lookup) return;
  state.lookup = found;
  showError(failure);
  renderLookup();
  drawRing();
}

// -- hot-key remedies and zone failures ---------------------------------------------------------

// The remedy settings the form gives; copies and parts left empty are the server's "auto".
function remedyParams() {
  const params = { ...placementParams(), keys: String(state.keys), prefix: state.prefix,
    zipf: String(state.zipf), writes: String(Number($("remedy-writes").value) / 100),
    top: $("remedy-top").value, near_cache_max_items: $("remedy-items").value,
    near_cache_ttl_s: $("remedy-ttl").value };
  if ($("remedy-spread").value) params.spread = $("remedy-spread").value;
  if ($("remedy-parts").value) params.parts = $("remedy-parts").value;
  return params;
}

// From a control of its own, an answer clears the banner; within a refresh, only an error shows
// (a lookup's error must not be cleared by the next request of the refresh).
function remedies() {
  return busyWhile(() => remediesNow(true));
}

async function remediesNow(own = false) {
  const ticket = (latest.remedies += 1);
  let found = null;
  let failure = null;
  if (state.zipf !== null) {
    try {
      found = await getJSON("/api/remedies", remedyParams());
    } catch (error) {
      failure = error;
    }
  }
  if (ticket !== latest.remedies) return;
  state.remedies = found;
  if (failure || own) showError(failure);
  renderRemedies();
  renderBars();
}

function failZone() {
  return busyWhile(() => failZoneNow(true));
}

async function failZoneNow(own = false) {
  const ticket = (latest.failZone += 1);
  const wanted = state.failZone;
  let found = null;
  let failure = null;
  if (wanted && zones().includes(wanted.zone)) {
    try {
      found = await getJSON("/api/fail_zone", { ...placementParams(), keys: String(state.keys),
        prefix: state.prefix, ...(state.zipf !== null ? { zipf: String(state.zipf) } : {}),
        zone: wanted.zone, replicas: wanted.replicas });
    } catch (error) {
      failure = error;
    }
  }
  if (ticket !== latest.failZone) return;
  state.failed = found;
  if (failure || own) showError(failure);
  renderFailZone();
  drawRing();
}

// The zones of the page's nodes, in the order they first appear.
function zones() {
  return [...new Set(state.nodes.map((node) => node.zone).filter(Boolean))];
}

function renderRemedies() {
  const found = state.remedies;
  $("remedies-table").hidden = !found;
  $("remedies-hint").hidden = Boolean(found);
  remedyRows($("remedy-rows"), found, state.remedy);
}

function renderFailZone() {
  const select = $("failzone-zone");
  const chosen = select.value || state.failZone?.zone;
  select.replaceChildren(...zones().map((zone) => new Option(zone, zone)));
  if (zones().includes(chosen)) select.value = chosen;
  $("failzone-button").disabled = zones().length === 0;
  const found = state.failed;
  $("failzone-table").hidden = !found;
  failureRows($("failzone-rows"), found);
  $("failzone-survivors").textContent = found ? survivorsLine(found) : "";
  if (!found) {
    $("failzone-line").textContent = zones().length ? "Choose a zone and fail it."
      : "Give the nodes zones, then fail one.";
    return;
  }
  $("failzone-line").textContent = `Zone ${found.zone} failed: ${found.failed.join(", ")}. ` +
    `${found.replicas} replicas per key, quorum ${found.quorum}, ${found.keys} keys.`;
}

// -- drawing the ring (ring.js) ---------------------------------------------------------------

function drawRing() {
  const report = state.report;
  const change = report.change;
  const mode = $("highlight").value;
  let moved = [];
  if (change && mode !== "none") {
    moved = mode === "modulo" ? change.moved_modulo_keys : change.moved_keys;
  }
  const colours = report.nodes.map((node) => colourOf(node.name));
  const names = report.nodes.map((node) => node.name);
  const failed = new Set((state.failed?.failed || []).map((name) => names.indexOf(name)));
  ringView($("ring"), report, { colours, moved: new Set(moved), lookup: state.lookup, failed });
  const settings = [`strategy ${report.strategy}`];
  if (report.vnodes !== null) settings.push(`${report.vnodes} vnodes per node`);
  if (report.hasher !== null) settings.push(`hasher ${report.hasher}`);
  $("ring-summary").textContent =
    `${report.keys.positions.length} keys on ${report.nodes.length} nodes, ${settings.join(", ")}`;
}

// The remedy the bars show: its row of /api/remedies, or null for none (the ring's requests).
function shownRemedy() {
  if (!state.report.popularity || !state.remedies || state.remedy === "none") return null;
  const row = state.remedies.rows.find((found) => found.remedy === state.remedy);
  // An answer for other nodes (a refresh in flight) is not drawn on these.
  return state.report.nodes.every((node) => node.name in row.calls) ? row : null;
}

function renderBars() {
  const report = state.report;
  const requests = Boolean(report.popularity);
  const remedy = shownRemedy();
  const value = (node) => (remedy ? remedy.calls[node.name]
    : requests ? node.requests : node.keys);
  const fair = (node) => (remedy ? remedy.fair_calls[node.name]
    : requests ? node.fair_requests : node.fair_keys);
  const scale = Math.max(...report.nodes.map((node) => Math.max(value(node), fair(node)))) * 1.1;
  const bars = $("bars");
  bars.replaceChildren();
  for (const node of report.nodes) {
    const row = document.createElement("div");
    row.className = "bar-row";
    row.dataset.node = node.name;
    const shown = Math.round(value(node));
    row.innerHTML =
      `<span class="bar-name"></span><span class="bar-track"><span class="bar"></span>` +
      `<span class="fair"></span></span><span class="bar-value"></span>`;
    row.querySelector(".bar-name").textContent = node.name;
    row.querySelector(".bar-value").textContent = String(shown);
    const bar = row.querySelector(".bar");
    bar.style.width = `${(100 * value(node)) / scale}%`;
    bar.style.background = colourOf(node.name);
    row.querySelector(".fair").style.left = `${(100 * fair(node)) / scale}%`;
    row.setAttribute("aria-label", `${node.name}: ${shown}, fair share ${fair(node).toFixed(1)}`);
    bars.append(row);
  }
  $("bars-title").textContent = remedy ? `Server calls per node with ${REMEDY_LABELS[remedy.remedy]}`
    : requests ? "Requests per node" : "Keys per node";
  const first = report.nodes[0];
  const equal = report.nodes.every((node) => node.weight === first.weight);
  $("fair-note").textContent = equal
    ? `Thin line: a fair share (${fair(first).toFixed(fair(first) % 1 ? 1 : 0)} ` +
      `${remedy ? "server calls" : requests ? "requests" : "keys"}).`
    : "Thin line: each node's fair share (its weight over the total weight).";
  const busiest = remedy ? { node: remedy.busiest, ratio: remedy.busiest_ratio,
    load: remedy.calls[remedy.busiest] } : requests ? report.popularity.busiest : report.busiest;
  $("busiest-ratio").textContent = busiest.ratio.toFixed(2);
  $("busiest-node").textContent = `node ${busiest.node}: ${Math.round(busiest.load)} ` +
    `${remedy ? "server calls" : requests ? "requests" : "keys"}`;
}

function percent(fraction) {
  return `(${(100 * fraction).toFixed(1)}%)`;
}

function renderChange() {
  const real = state.report.change;
  const change = real || state.preview;
  const ring = state.report.strategy === "ring";
  const what = { add: "added", remove: "removed", reweight: `weight ${real?.weight} for` };
  $("last-change").textContent = real ? `${(100 * real.moved_fraction).toFixed(1)}%` :
    "no change yet";
  $("last-change-note").textContent = real ? `of the keys moved: ${what[real.kind]} ${real.node}` :
    "add, remove or reweight a node";
  const when = !real && change ? ` if ${change.node} is added` : "";
  $("moved-ring-title").textContent =
    (ring ? "Moved on the ring" : `Moved with ${state.report.strategy}`) + when;
  $("moved-modulo-title").textContent = `Moved with hash % N${when}`;
  $("moved-ring-note").textContent = ring ? "consistent hashing" : "the chosen strategy";
  if (!change) {
    for (const id of ["moved-ring", "moved-modulo"]) $(id).textContent = "–";
    for (const id of ["moved-ring-fraction", "moved-modulo-fraction", "transfers"]) {
      $(id).textContent = "";
    }
    return;
  }
  $("moved-ring").textContent = String(change.moved);
  $("moved-ring-fraction").textContent = percent(change.moved_fraction);
  $("moved-modulo").textContent = String(change.moved_modulo);
  $("moved-modulo-fraction").textContent = percent(change.moved_modulo_fraction);
  if (change.moved_share !== null && change.basis !== "keys") {
    // ringkit.diff's exact figure over the whole space, beside the least any placement moves.
    const space = change.basis === "points" ? "keyspace" : "table";
    $("moved-ring-note").textContent = `${(100 * change.moved_share).toFixed(1)}% of the ` +
      `${space}; least possible ${(100 * change.optimum_share).toFixed(1)}%`;
  }
  const transfers = Object.entries(change.transfers).map(([path, count]) => `${path} ${count}`);
  const lead = real ? "Moved keys" : `Keys that would move if ${change.node} is added`;
  $("transfers").textContent = transfers.length
    ? `${lead}, from → to: ${transfers.join(", ")}` : "No key moved.";
}

function renderNodes() {
  const rows = $("node-rows");
  rows.replaceChildren();
  for (const node of state.nodes) {
    const row = document.createElement("tr");
    row.innerHTML =
      `<th scope="row"><span class="swatch"></span><span class="name"></span></th>` +
      `<td><input type="number" min="0.1" max="16" step="0.1" class="weight"></td>` +
      `<td><input class="zone" maxlength="32" size="5" placeholder="none"></td>` +
      `<td><button type="button" class="remove">Remove</button></td>`;
    row.querySelector(".swatch").style.background = colourOf(node.name);
    row.querySelector(".name").textContent = node.name;
    const weight = row.querySelector(".weight");
    weight.value = node.weight;
    weight.setAttribute("aria-label", `Weight of node ${node.name}`);
    weight.addEventListener("change", () =>
      refresh({ kind: "reweight", value: `${node.name}:${weight.value}` }));
    const zone = row.querySelector(".zone");
    zone.value = node.zone || "";
    zone.setAttribute("aria-label", `Zone of node ${node.name}`);
    zone.addEventListener("change", () => {
      node.zone = zone.value || null;
      refresh(null);
    });
    const remove = row.querySelector(".remove");
    remove.setAttribute("aria-label", `Remove node ${node.name}`);
    remove.disabled = state.nodes.length === 1;
    remove.addEventListener("click", () => refresh({ kind: "remove", value: node.name }));
    rows.append(row);
  }
  $("add-name").value = suggestName();
}

function suggestName(nodes = state.nodes) {
  const names = new Set(nodes.map((node) => node.name));
  for (const letter of "ABCDEFGHIJKLMNOPQRSTUVWXYZ") if (!names.has(letter)) return letter;
  let i = 1;
  while (names.has(`n${i}`)) i += 1;
  return `n${i}`;
}

function renderLegend() {
  const legend = $("legend");
  legend.replaceChildren();
  for (const node of state.report.nodes) {
    const item = document.createElement("li");
    item.innerHTML = `<span class="swatch"></span>`;
    item.querySelector(".swatch").style.background = colourOf(node.name);
    item.append(`${node.name} ${node.keys}`);
    legend.append(item);
  }
}

function renderLookup() {
  const found = state.lookup;
  const walk = $("lookup-walk");
  walk.replaceChildren();
  if (!found) {
    $("lookup-line").textContent = "";
    $("lookup-owner").textContent = "–";
    $("lookup-preference").textContent = "–";
    return;
  }
  const how = found.walk ? "walk clockwise" : `${state.report.strategy} picks`;
  const hashed = found.hash === null ? "" : `hash = ${found.hash} → `;
  $("lookup-line").textContent = `${hashed}${how} → node ${found.owner}`;
  $("lookup-owner").textContent = found.owner;
  $("lookup-preference").textContent = found.preference_list.join(", ");
  for (const step of found.walk ? found.walk.steps : []) {
    const item = document.createElement("li");
    let role = "already met, skipped";
    if (step.held_back) {
      role = step.rank === null ? "held back: its zone already has a replica"
        : `replica ${step.rank} (held back until every zone had one)`;
    } else if (step.rank !== null) {
      role = step.rank === 1 ? "owner" : `replica ${step.rank}`;
    }
    const wrapped = step.wrapped ? " (wrapped)" : "";
    item.textContent = `token ${step.token}${wrapped} → ${step.node}: ${role}`;
    walk.append(item);
  }
}

function syncControls() {
  for (const input of document.querySelectorAll("input[name=vnodes]")) {
    input.checked = Number(input.value) === state.vnodes;
  }
  $("vnodes-custom").value = state.vnodes;
  for (const input of document.querySelectorAll("input[name=vnodes], #vnodes-custom")) {
    input.disabled = !uses("vnodes");
  }
  $("hasher").value = state.hasher;
  $("hasher").disabled = !uses("hasher");
  $("strategy").value = state.strategy;
  $("keys").value = state.keys;
  $("zipf-on").checked = state.zipf !== null;
}

function render() {
  syncControls();
  renderNodes();
  renderLegend();
  renderBars();
  renderChange();
  renderFailZone();
  drawRing();
}

// -- controls ----------------------------------------------------------------------------------

function buildControls(meta) {
  const choices = $("vnode-choices");
  for (const count of meta.vnode_choices) {
    const label = document.createElement("label");
    label.innerHTML = `<input type="radio" name="vnodes" value="${count}"> ${count}`;
    label.querySelector("input").addEventListener("change", () => {
      state.vnodes = count;
      refresh(null);
    });
    choices.append(label);
  }
  $("vnodes-custom").addEventListener("change", (event) => {
    state.vnodes = Number(event.target.value);
    refresh(null);
  });
  for (const [id, names] of [["hasher", meta.hashers.map((h) => h.name)],
    ["strategy", meta.strategies]]) {
    const select = $(id);
    // The server rendered the choices with the defaults selected; these are the same names.
    select.replaceChildren(...names.map((name) => new Option(name, name)));
    select.addEventListener("change", () => {
      state[id] = select.value;
      refresh(null);
    });
  }
  $("keys").addEventListener("change", (event) => {
    state.keys = Number(event.target.value);
    refresh(null);
  });
  const zipfChanged = () => {
    state.zipf = $("zipf-on").checked ? Number($("zipf").value) : null;
    refresh(null);
  };
  $("zipf-on").addEventListener("change", zipfChanged);
  $("zipf").addEventListener("change", () => { if ($("zipf-on").checked) zipfChanged(); });
  $("highlight").addEventListener("change", drawRing);
  for (const input of document.querySelectorAll("input[name=remedy]")) {
    input.addEventListener("change", () => {
      state.remedy = input.value;
      renderRemedies();
      renderBars();
    });
  }
  for (const id of ["remedy-writes", "remedy-top", "remedy-spread", "remedy-parts",
    "remedy-items", "remedy-ttl"]) $(id).addEventListener("change", remedies);
  $("zones-form").addEventListener("submit", (event) => {
    event.preventDefault();
    // Round-robin in page order, as the simulator's top-level `zones = Z` does.
    const count = Number($("zone-count").value);
    if (!(count >= 1)) return;
    state.nodes.forEach((node, i) => { node.zone = `z${i % count}`; });
    refresh(null);
  });
  $("failzone-form").addEventListener("submit", (event) => {
    event.preventDefault();
    state.failZone = { zone: $("failzone-zone").value, replicas: $("failzone-replicas").value };
    failZone();
  });
  $("add-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const node = { name: $("add-name").value.trim(), weight: Number($("add-weight").value),
      zone: $("add-zone").value.trim() || null };
    refresh({ kind: "add", value: nodeSpec(node) });
  });
  // A refresh looks the key up again with these fields: a fixed field must clear its error
  // without another submit.
  $("lookup-replicas").addEventListener("change", lookup);
  $("lookup-form").addEventListener("submit", (event) => {
    event.preventDefault();
    lookup();
  });
}

async function start() {
  try {
    state.meta = await getJSON("/api/meta", {});
  } catch (error) {
    showError(error);
    return;
  }
  if (state.meta.live) {
    startLive(state.meta, showError); // ringkit serve --store: the live ring instead
    return;
  }
  const defaults = state.meta.defaults;
  state.nodes = defaults.nodes.split(",").map((name) => ({ name, weight: 1, zone: null }));
  state.vnodes = Number(defaults.vnodes);
  state.hasher = defaults.hasher;
  state.strategy = defaults.strategy;
  state.keys = Number(defaults.keys);
  state.prefix = defaults.prefix;
  buildControls(state.meta);
  await refresh(null);
  document.body.dataset.ready = "true";
}

document.addEventListener("DOMContentLoaded", start);
