/**
 * A small DOM helper: elements are made with `h` (HTML) and `s` (SVG), text always as text nodes, so
 * nothing the server or the address bar holds is ever parsed as markup.
 */

/** What an element may hold: nodes, text, numbers; nothing (null, undefined, false) is skipped. */
export type Child = Node | string | number | null | undefined | false | readonly Child[];

/** Attributes: strings and numbers are set, `true` sets an empty attribute, false/undefined leave it out; `on*` functions listen. */
export type Attributes = Record<string, string | number | boolean | undefined | ((event: Event) => void)>;

function append(parent: Element, children: readonly Child[]): void {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(parent, child as readonly Child[]);
    else if (child instanceof Node) parent.appendChild(child);
    else parent.appendChild(document.createTextNode(String(child)));
  }
}

function setAttributes(element: Element, attributes: Attributes | undefined): void {
  for (const [name, value] of Object.entries(attributes ?? {})) {
    if (typeof value === "function") element.addEventListener(name.slice(2), value);
    else if (value === true) element.setAttribute(name, "");
    else if (value !== false && value !== undefined) element.setAttribute(name, String(value));
  }
}

/** An HTML element. */
export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attributes?: Attributes, ...children: Child[]): HTMLElementTagNameMap[K] {
  const element = document.createElement(tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

/** An SVG element. */
export function s<K extends keyof SVGElementTagNameMap>(tag: K, attributes?: Attributes, ...children: Child[]): SVGElementTagNameMap[K] {
  const element = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttributes(element, attributes);
  append(element, children);
  return element;
}

/** Replaces what `parent` holds. */
export function replace(parent: Element, ...children: Child[]): void {
  parent.replaceChildren();
  append(parent, children);
}

/** A table with a caption, column headers and rows (each cell any child). */
export function table(caption: string, headers: readonly string[], rows: readonly (readonly Child[])[], empty = "None."): HTMLElement {
  if (rows.length === 0) return h("p", { class: "empty" }, `${caption}: ${empty}`);
  return h(
    "div",
    { class: "scroll" },
    h(
      "table",
      {},
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, headers.map((header) => h("th", { scope: "col" }, header)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell) => h("td", {}, cell))))),
    ),
  );
}
