// Building DOM from record data: text always goes through textContent, never innerHTML.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (key === "class") node.className = value;
    else if (key.startsWith("data-")) node.setAttribute(key, value);
    else node[key] = value;
  }
  for (const child of children) {
    node.append(child instanceof Node ? child : document.createTextNode(child == null ? "" : String(child)));
  }
  return node;
}

export function row(cells, attrs = {}) {
  return el("tr", attrs, ...cells.map((cell) => (cell instanceof Node && cell.tagName === "TD" ? cell : el("td", {}, cell))));
}

export function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

export function ago(iso) {
  if (!iso) return "";
  const seconds = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (seconds < 60) return `${Math.floor(seconds)}s ago`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ago`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h${Math.floor((seconds % 3600) / 60)}m ago`;
  return `${Math.floor(seconds / 86400)}d ago`;
}

export function short(text, width = 60) {
  const flat = (text || "").split(/\s+/).join(" ").trim();
  return flat.length <= width ? flat : flat.slice(0, width - 1) + "…";
}
