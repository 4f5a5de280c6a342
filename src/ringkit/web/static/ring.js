// The ring as SVG: positions are points over 2**64 (0 at the top, clockwise), as the API gives
// them; this module only draws, it never decides an owner.

const SVG = "http://www.w3.org/2000/svg";
const R = 200; // radius of the ring in SVG units

function el(tag, attributes = {}, text = null) {
  const node = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, value);
  if (text !== null) node.textContent = text;
  return node;
}

function at(position, radius) {
  const angle = position * 2 * Math.PI; // 0 at the top, clockwise
  return [radius * Math.sin(angle), -radius * Math.cos(angle)];
}

// The clockwise arc from `from` to `to` (turns), or the whole circle when `whole`; null when the
// two ends meet (an arc too short to see).
function arcPath(from, to, radius, whole = false) {
  let span = to - from;
  if (span < 0) span += 1;
  const [x1, y1] = at(from, radius);
  if (whole) {
    const [xh, yh] = at(from + 0.5, radius);
    return `M ${x1} ${y1} A ${radius} ${radius} 0 1 1 ${xh} ${yh} ` +
      `A ${radius} ${radius} 0 1 1 ${x1} ${y1}`;
  }
  if (span === 0) return null;
  const [x2, y2] = at(from + span, radius);
  const large = span > 0.5 ? 1 : 0;
  return `M ${x1} ${y1} A ${radius} ${radius} 0 ${large} 1 ${x2} ${y2}`;
}

function drawOwnership(svg, report, colours, failed = new Set()) {
  // A token owns the arc (previous token, token]: drawn as a band just inside the ring.
  const tokens = report.tokens;
  const group = el("g", { class: "arcs" });
  const count = tokens.positions.length;
  let start = tokens.positions[count - 1];
  for (let i = 0; i < count; i += 1) {
    const owner = tokens.owners[i];
    while (i + 1 < count && tokens.owners[i + 1] === owner) i += 1;
    const end = tokens.positions[i];
    const path = arcPath(start, end, R - 14, count === 1 || (i === count - 1 && start === end));
    if (path) group.append(el("path", { d: path, stroke: colours[owner], class: "arc" }));
    start = end;
  }
  svg.append(group);
  const ticks = el("g", { class: "tokens" });
  const labelled = count <= 48;
  const outer = labelled ? R + 18 : R + 11; // many tokens: short ticks, so they stay apart
  tokens.positions.forEach((position, i) => {
    const [x1, y1] = at(position, R + 5);
    const [x2, y2] = at(position, outer);
    const down = failed.has(tokens.owners[i]); // a failed zone's node: a grey dashed tick
    ticks.append(el("line", { x1, y1, x2, y2, stroke: down ? "#8a8f98" : colours[tokens.owners[i]],
      "stroke-width": labelled ? 2.5 : 1.2, class: down ? "failed-tick" : "tick" }));
    if (labelled) {
      const [x, y] = at(position, R + 30);
      const name = report.nodes[tokens.owners[i]].name;
      ticks.append(el("text", { x, y, class: "token-label" }, name));
    }
  });
  svg.append(ticks);
}

function drawKeys(svg, report, colours, moved) {
  const keys = report.keys;
  const hot = new Set((report.popularity?.hot_keys || []).map((key) => key.index));
  const radius = keys.positions.length > 2000 ? 1.6 : 3.4;
  const group = el("g", { class: "keys" });
  const marks = el("g", { class: "marks" });
  keys.positions.forEach((position, i) => {
    const [x, y] = at(position, R);
    const dot = el("circle", { cx: x, cy: y, r: radius, fill: colours[keys.owners[i]] });
    if (keys.positions.length <= 2000) dot.append(el("title", {}, keys.names[i]));
    group.append(dot);
    if (moved.has(i)) marks.append(el("circle", { cx: x, cy: y, r: radius + 3, class: "moved" }));
    if (hot.has(i)) {
      marks.append(el("circle", { cx: x, cy: y, r: radius + 5, class: "hot" }));
      const [lx, ly] = at(position, i % 2 ? R - 38 : R - 26); // alternate, so neighbours stay apart
      marks.append(el("text", { x: lx, y: ly, class: "hot-label" }, `#${i + 1}`));
    }
  });
  svg.append(group, marks);
}

function drawLookup(svg, found) {
  if (!found || found.position === null) return; // a placement that does not hash keys
  const group = el("g", { class: "lookup-marks" });
  const steps = found.walk ? found.walk.steps : [];
  if (steps.length) {
    const path = arcPath(found.position, steps[0].position, R + 10);
    if (path) group.append(el("path", { d: path, class: "walk-arc" }));
  }
  const [x, y] = at(found.position, R);
  group.append(el("circle", { cx: x, cy: y, r: 7, class: "lookup-key" }));
  const [lx, ly] = at(found.position, R - 62); // inside the ring, clear of the key dots
  const label = el("text", { x: lx, y: ly, class: "lookup-label" }, found.key);
  group.append(label);
  svg.append(group);
  // Hot-key labels sit at R - 26 / R - 38; a key name centred at R - 62 is wide enough to reach
  // them beside the ring's sides. Step it inward until its box is clear of them.
  const hot = [...svg.querySelectorAll(".hot-label")].map((text) => text.getBBox());
  for (let radius = R - 74; radius > 40; radius -= 12) {
    const box = label.getBBox();
    if (!hot.some((other) => intersects(box, other))) break;
    const [x, y] = at(found.position, radius);
    label.setAttribute("x", x);
    label.setAttribute("y", y);
  }
}

function intersects(a, b) {
  return a.x < b.x + b.width && b.x < a.x + a.width && a.y < b.y + b.height && b.y < a.y + a.height;
}

/**
 * Draw `report` (an /api/ring answer) into `svg`: the ownership band and token ticks (rings
 * only), key dots coloured by owner, rings around `moved` key indices, hot keys, and the
 * looked-up key with its clockwise walk to the owner; the tokens of the `failed` node indices
 * (a failed zone) are grey.
 */
export function drawRing(svg, report, { colours, moved, lookup, failed = new Set() }) {
  for (const child of [...svg.children]) if (child.tagName !== "title") child.remove();
  svg.append(el("circle", { cx: 0, cy: 0, r: R, class: "track" }));
  if (report.tokens) drawOwnership(svg, report, colours, failed);
  drawKeys(svg, report, colours, moved);
  drawLookup(svg, lookup);
  const centre = el("text", { x: 0, y: -6, class: "centre" },
    `${report.keys.positions.length} keys · ${report.nodes.length} nodes`);
  const settings = [report.strategy];
  if (report.vnodes !== null) settings.push(`${report.vnodes} vnodes`);
  if (report.hasher !== null) settings.push(report.hasher);
  const sub = el("text", { x: 0, y: 14, class: "centre sub" }, settings.join(" · "));
  svg.append(centre, sub);
}

/**
 * Draw a live ring (an /api/live answer's `ring`) into `svg`: the ownership band and token
 * ticks coloured by member, and `caption` in the centre.
 */
export function drawLiveRing(svg, ring, colours, caption) {
  for (const child of [...svg.children]) if (child.tagName !== "title") child.remove();
  svg.append(el("circle", { cx: 0, cy: 0, r: R, class: "track" }));
  if (ring.positions && ring.positions.length) {
    const report = { tokens: { positions: ring.positions, owners: ring.owners },
      nodes: ring.nodes.map((name) => ({ name })) };
    drawOwnership(svg, report, colours);
  }
  svg.append(el("text", { x: 0, y: -6, class: "centre" }, caption[0]),
    el("text", { x: 0, y: 14, class: "centre sub" }, caption[1]));
}
