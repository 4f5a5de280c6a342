// The load-balancer lesson: /api/balancers places the same users under HAProxy's, nginx's,
// Envoy's ring hash and Maglev layouts and hash % N, before and after one backend joins. Every
// number comes from the server (ringkit.sim.balancers, the library's exact layouts).

const $ = (id) => document.getElementById(id);

function cell(row, content, className) {
  const td = document.createElement("td");
  if (typeof content === "string") td.textContent = content;
  else td.append(content);
  if (className) td.className = className;
  row.append(td);
  return td;
}

// Users per backend as small bars scaled to the fair share (a bar twice as long: twice fair).
function spread(counts, users) {
  const names = Object.keys(counts);
  const fair = users / names.length;
  const box = document.createElement("div");
  box.className = "lb-spread";
  for (const name of names) {
    const bar = document.createElement("span");
    bar.className = "lb-bar";
    bar.style.height = `${Math.min(2, counts[name] / fair) * 14}px`;
    bar.title = `${name}: ${counts[name].toLocaleString("en")} users`;
    box.append(bar);
  }
  const most = Math.max(...Object.values(counts));
  const label = document.createElement("span");
  label.className = "lb-note";
  label.textContent = `busiest ${(most / fair).toFixed(2)}× fair`;
  box.append(label);
  return box;
}

function render(report) {
  const rows = $("balancers-rows");
  rows.replaceChildren();
  for (const result of report.rows) {
    const row = document.createElement("tr");
    row.dataset.layout = result.layout;
    cell(row, result.label);
    cell(row, spread(result.before, result.users));
    cell(row, spread(result.after, result.users));
    const moved = `${result.moved.toLocaleString("en")} (${(result.moved_fraction * 100).toFixed(1)}%)`;
    cell(row, moved, "lb-moved").dataset.moved = String(result.moved);
    cell(row, `${(result.least_fraction * 100).toFixed(1)}%`);
    rows.append(row);
  }
  $("balancers-table").hidden = false;
  $("balancers-line").textContent = `${report.users.toLocaleString("en")} users on ` +
    `${report.backends.length} backends; ${report.join} joins.`;
  document.body.dataset.balancers = report.join;
}

async function refresh(event) {
  if (event) event.preventDefault();
  const params = new URLSearchParams({
    backends: $("balancers-backends").value, users: $("balancers-users").value });
  const response = await fetch(`/api/balancers?${params}`);
  const body = await response.json();
  if (!response.ok) {
    $("balancers-line").textContent = body.error.message;
    return;
  }
  render(body);
}

if ($("balancers-form")) {
  $("balancers-form").addEventListener("submit", refresh);
  refresh().catch((error) => { $("balancers-line").textContent = String(error); });
}
