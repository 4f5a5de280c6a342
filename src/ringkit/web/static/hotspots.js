// The tables of the hot-key remedies (/api/remedies) and of a zone failure (/api/fail_zone):
// this module only lays out what the server answered, it computes none of it.

export const REMEDY_LABELS = { none: "none", spread: "spread reads", near_cache: "near-cache",
  split: "split keys" };

// One table row: a header cell naming it, then data cells.
function tableRow(cells) {
  const row = document.createElement("tr");
  for (const [i, value] of cells.entries()) {
    const cell = document.createElement(i === 0 ? "th" : "td");
    if (i === 0) cell.scope = "row";
    cell.textContent = value;
    row.append(cell);
  }
  return row;
}

// A row per remedy: busiest × fair, server calls, extra items, extra calls, staleness; the
// remedy the bars show is marked `chosen`.
export function remedyRows(body, found, chosen) {
  body.replaceChildren();
  for (const remedy of found ? found.rows : []) {
    const where = { nodes: " on nodes", clients: " in clients" }[remedy.held_in] || "";
    const row = tableRow([REMEDY_LABELS[remedy.remedy], remedy.busiest_ratio.toFixed(2),
      remedy.server_calls.toFixed(2), `${remedy.extra_items.toLocaleString("en")}${where}`,
      String(remedy.extra_writes_per_update), String(remedy.extra_reads_per_read),
      `${remedy.worst_staleness_s} s`]);
    row.dataset.remedy = remedy.remedy;
    row.classList.toggle("chosen", remedy.remedy === chosen);
    body.append(row);
  }
}

// A row per placement (zone-aware, zone-blind): keys lost, below quorum, busiest survivor.
export function failureRows(body, found) {
  body.replaceChildren();
  if (!found) return;
  for (const [label, outcome] of [["zone-aware", found.zone_aware],
    ["zone-blind", found.zone_blind]]) {
    const busiest = outcome.busiest ? `${outcome.busiest.node} ` +
      `${outcome.busiest.ratio.toFixed(2)}× fair (${outcome.busiest.metric})` : "none left";
    const row = tableRow([label, String(outcome.keys_lost), String(outcome.keys_below_quorum),
      busiest]);
    row.dataset.placement = label;
    body.append(row);
  }
}

// The load on the survivors after failover, node by node, for both placements.
export function survivorsLine(found) {
  const loads = (outcome) => outcome.survivors.map((node) =>
    `${node.name} ${Math.round(node.requests ?? node.keys)}`).join(", ") || "none";
  const unit = found.zone_aware.busiest?.metric || "keys";
  return `${unit[0].toUpperCase()}${unit.slice(1)} per survivor, zone-aware: ` +
    `${loads(found.zone_aware)}; zone-blind: ${loads(found.zone_blind)}.`;
}
