// The live view (ringkit serve --store): it asks /api/live again as soon as the last answer is
// drawn, with after_epoch, so the server answers when the ring changes (a long poll: the
// store's watch wakes it; the page never polls on a timer). Every number comes from the server.
import { drawLiveRing } from "./ring.js";

const $ = (id) => document.getElementById(id);
const colours = new Map(); // member name -> palette index, kept while the page lives

function colourOf(name, palette) {
  if (!colours.has(name)) colours.set(name, colours.size % palette.length);
  return palette[colours.get(name)];
}

function cell(row, text) {
  const td = document.createElement("td");
  td.textContent = text;
  row.append(td);
  return td;
}

function render(report, palette) {
  $("live-epoch").textContent = String(report.epoch);
  const rows = $("live-rows");
  rows.replaceChildren();
  for (const member of report.members) {
    const row = document.createElement("tr");
    row.className = "live-member";
    row.dataset.member = member.name;
    row.dataset.state = member.state;
    const name = cell(row, member.name);
    const swatch = document.createElement("span");
    swatch.className = "swatch";
    swatch.style.background = colourOf(member.name, palette);
    name.prepend(swatch);
    cell(row, member.state);
    cell(row, member.zone || "–");
    cell(row, String(member.weight));
    cell(row, String(member.tokens));
    cell(row, `${(member.share * 100).toFixed(1)}%`).className = "live-share";
    const left = member.lease_remaining_s;
    cell(row, left === null ? "–" : `${left.toFixed(1)} s`);
    rows.append(row);
  }
  const ring = report.ring;
  const ringColours = ring.nodes.map((name) => colourOf(name, palette));
  drawLiveRing($("live-ring"), ring, ringColours,
    [`${ring.nodes.length} in the ring`, `epoch ${report.epoch}`]);
  $("live-note").textContent = report.members.length
    ? "" : "No members yet: processes join with ringkit.live.connect(url).join(name).";
  document.body.dataset.liveEpoch = String(report.epoch);
}

async function fetchLive(afterEpoch) {
  const params = afterEpoch === null ? "" : `?after_epoch=${afterEpoch}`;
  const response = await fetch(`/api/live${params}`);
  if (response.status === 503) {
    // Too many long polls wait on the server already: wait as it asks, then ask again.
    const seconds = Number(response.headers.get("Retry-After")) || 2;
    await new Promise((resolve) => setTimeout(resolve, seconds * 1000));
    return fetchLive(afterEpoch);
  }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error.message);
  return body;
}

/** Switch the page to the live view and follow the ring until the page closes. */
export async function startLive(meta, showError) {
  document.querySelector("main.layout").hidden = true;
  $("live").hidden = false;
  document.body.dataset.mode = "live";
  $("live-store").textContent = meta.store;
  let epoch = null;
  for (;;) {
    try {
      const report = await fetchLive(epoch);
      render(report, meta.palette);
      showError(null);
      epoch = report.epoch;
      document.body.dataset.ready = "true";
    } catch (error) {
      showError(error);
      await new Promise((resolve) => setTimeout(resolve, 2000)); // the server is away: retry
    }
  }
}
