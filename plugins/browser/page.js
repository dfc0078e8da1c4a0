// The browser plugin's script, run in the page by Runtime.callFunctionOn:
// (op, arg) => result. "mark" gives every element a BrowserGym-style bid
// attribute and returns the page's state; "find" returns the element with
// a bid.
(op, arg) => {
  const BID = 'bid';
  // Every element of the document and of its open shadow roots, in
  // document order.
  const all = () => {
    const out = [];
    const walk = (root) => {
      for (const el of root.querySelectorAll('*')) {
        out.push(el);
        if (el.shadowRoot) walk(el.shadowRoot);
      }
    };
    walk(document);
    return out;
  };
  if (op === 'find') {
    for (const el of all()) {
      if (el.getAttribute(BID) === arg) return el;
    }
    return null;
  }
  if (op === 'focus') {
    let a = document.activeElement;
    while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
    return a;
  }

  // mark: as BrowserGym's frame_mark_elements, a counter kept by the
  // window numbers the elements not yet marked; an element whose bid
  // another holds too (a clone) gets a new one.
  const elems = all();
  let next = window.__bothy_next_bid || 0;
  const seen = new Set();
  for (const el of elems) {
    let b = el.getAttribute(BID);
    if (b === null || seen.has(b)) {
      b = String(next++);
      el.setAttribute(BID, b);
    }
    seen.add(b);
  }
  window.__bothy_next_bid = next;

  const vw = window.innerWidth, vh = window.innerHeight;
  const clickableTags = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'SUMMARY', 'OPTION', 'LABEL']);
  const clickableRoles = new Set(['button', 'link', 'checkbox', 'radio', 'tab', 'menuitem', 'option', 'switch', 'combobox', 'textbox']);
  const props = {};
  if (arg && arg.props) {
    for (const el of elems) {
      const r = el.getBoundingClientRect();
      const p = { visibility: 0, bbox: null, clickable: false, set_of_marks: false };
      if (r.width > 0 && r.height > 0) {
        p.bbox = [r.x, r.y, r.width, r.height];
        const st = getComputedStyle(el);
        if (st.visibility !== 'hidden' && st.display !== 'none' && st.opacity !== '0') {
          const w = Math.max(0, Math.min(r.right, vw) - Math.max(r.left, 0));
          const h = Math.max(0, Math.min(r.bottom, vh) - Math.max(r.top, 0));
          p.visibility = Math.round((w * h) / (r.width * r.height) * 100) / 100;
        }
        p.clickable = (clickableTags.has(el.tagName) && !(el.tagName === 'A' && !el.hasAttribute('href'))) ||
          el.hasAttribute('onclick') || clickableRoles.has(el.getAttribute('role')) || st.cursor === 'pointer';
        p.set_of_marks = p.visibility >= 0.5 && p.clickable;
      }
      props[el.getAttribute(BID)] = p;
    }
  }

  // The page as markdown, as html2text renders it (what OpenHands puts in
  // a browse observation's content).
  const skip = new Set(['SCRIPT', 'STYLE', 'NOSCRIPT', 'TEMPLATE', 'HEAD', 'SVG', 'IFRAME', 'CANVAS', 'OBJECT']);
  const block = new Set(['P', 'DIV', 'SECTION', 'ARTICLE', 'HEADER', 'FOOTER', 'MAIN', 'NAV', 'ASIDE', 'FORM', 'FIELDSET',
    'TABLE', 'TR', 'UL', 'OL', 'DL', 'DT', 'DD', 'FIGURE', 'FIGCAPTION', 'ADDRESS', 'DETAILS', 'BLOCKQUOTE', 'BODY', 'HTML', 'LI', 'PRE',
    'H1', 'H2', 'H3', 'H4', 'H5', 'H6', 'HR', 'LEGEND']);
  let out = '';
  const nl = (n) => {
    out = out.replace(/[ \t]+$/, '');
    const m = out.match(/\n*$/)[0].length;
    if (out.length > 0 && m < n) out += '\n'.repeat(n - m);
  };
  const text = (s) => {
    s = s.replace(/\s+/g, ' ');
    if (s === ' ' && (out === '' || /[\s]$/.test(out))) return;
    if (/(^|\n)$/.test(out)) s = s.replace(/^ /, '');
    out += s;
  };
  const lists = [];
  const walk = (node) => {
    if (node.nodeType === Node.TEXT_NODE) { text(node.nodeValue); return; }
    if (node.nodeType !== Node.ELEMENT_NODE) return;
    const el = node, tag = el.tagName.toUpperCase();
    if (skip.has(tag) || el.hidden) return;
    const kids = () => {
      for (const c of (el.shadowRoot ? el.shadowRoot.childNodes : el.childNodes)) walk(c);
    };
    const h = /^H([1-6])$/.exec(tag);
    if (h) { nl(2); out += '#'.repeat(+h[1]) + ' '; kids(); nl(2); return; }
    switch (tag) {
      case 'BR': out += '  \n'; return;
      case 'HR': nl(2); out += '* * *'; nl(2); return;
      case 'A': {
        const href = el.getAttribute('href');
        if (!href || href.startsWith('javascript:')) { kids(); return; }
        const start = out.length;
        kids();
        const label = out.slice(start).trim();
        out = out.slice(0, start);
        text(' ');
        out += '[' + label + '](' + el.href + ')';
        return;
      }
      case 'IMG': {
        const alt = el.getAttribute('alt') || '';
        if (el.src) out += '![' + alt + '](' + el.src + ')';
        return;
      }
      case 'STRONG': case 'B': out += '**'; kids(); out += '**'; return;
      case 'EM': case 'I': out += '_'; kids(); out += '_'; return;
      case 'CODE': if (el.parentElement && el.parentElement.tagName === 'PRE') break; out += '`'; kids(); out += '`'; return;
      case 'PRE': nl(2); out += '```\n' + el.innerText.replace(/\n$/, '') + '\n```'; nl(2); return;
      case 'UL': case 'OL': nl(lists.length ? 1 : 2); lists.push({ ordered: tag === 'OL', n: 0 }); kids(); lists.pop(); nl(lists.length ? 1 : 2); return;
      case 'LI': {
        nl(1);
        const l = lists[lists.length - 1] || { ordered: false, n: 0 };
        l.n++;
        out += '  '.repeat(Math.max(lists.length, 1)) + (l.ordered ? l.n + '. ' : '* ');
        kids();
        nl(1);
        return;
      }
      case 'TD': case 'TH': kids(); out += ' | '; return;
      case 'TR': nl(1); kids(); out = out.replace(/ \| $/, ''); nl(1); return;
      case 'INPUT': {
        const t = (el.type || '').toLowerCase();
        if (t === 'submit' || t === 'button' || t === 'reset') text(' ' + (el.value || t) + ' ');
        return;
      }
      case 'SELECT': case 'TEXTAREA': return;
    }
    if (block.has(tag)) { nl(tag === 'DIV' || tag === 'LI' || tag === 'TR' ? 1 : 2); kids(); nl(tag === 'DIV' ? 1 : 2); return; }
    kids();
  };
  if (document.body) walk(document.body);
  const content = out.replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim() + '\n';

  let focused = document.activeElement;
  while (focused && focused.shadowRoot && focused.shadowRoot.activeElement) focused = focused.shadowRoot.activeElement;
  const fb = focused && focused !== document.body && focused !== document.documentElement ? focused.getAttribute(BID) || '' : '';
  return { url: location.href, title: document.title, content, focused: fb, props };
}
