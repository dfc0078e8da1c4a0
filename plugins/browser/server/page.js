// The browser plugin's script, run in the page by Runtime.callFunctionOn:
// (op, arg) => result. "mark" gives every element a BrowserGym-style bid
// attribute and returns the page's state; "find" returns the element with
// a bid (or the frame element whose document holds it); "focus" the
// focused element; "som" draws the set of marks on a screenshot.
(op, arg) => {
  const BID = 'bid';
  // som: the screenshot arg.png (base64) with a box and a label drawn for
  // each of arg.marks ({bid, bbox: [x, y, width, height]}), as BrowserGym's
  // overlay_som; answers the new PNG, base64. Drawn on an OffscreenCanvas:
  // the page's DOM is not touched.
  const setOfMarks = async ({ png, marks }) => {
    const raw = atob(png);
    const bytes = new Uint8Array(raw.length);
    for (let i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
    const img = await createImageBitmap(new Blob([bytes], { type: 'image/png' }));
    const canvas = new OffscreenCanvas(img.width, img.height);
    const g = canvas.getContext('2d');
    g.drawImage(img, 0, 0);
    const colors = ['#e6194b', '#3cb44b', '#4363d8', '#f58231', '#911eb4', '#008080', '#9a6324', '#800000'];
    g.font = 'bold 12px "Liberation Sans", Arial, sans-serif';
    g.textBaseline = 'top';
    marks.forEach(({ bid, bbox }, i) => {
      const [x, y, w, h] = bbox;
      const color = colors[i % colors.length];
      g.lineWidth = 2;
      g.strokeStyle = color;
      g.strokeRect(x, y, w, h);
      const tw = Math.ceil(g.measureText(bid).width) + 4;
      const ly = y >= 15 ? y - 15 : y;
      g.fillStyle = color;
      g.fillRect(x, ly, tw, 15);
      g.fillStyle = '#ffffff';
      g.fillText(bid, x + 2, ly + 2);
    });
    const out = new Uint8Array(await (await canvas.convertToBlob({ type: 'image/png' })).arrayBuffer());
    let s = '';
    for (let i = 0; i < out.length; i += 0x8000) s += String.fromCharCode.apply(null, out.subarray(i, i + 0x8000));
    return btoa(s);
  };
  // Every element of a document and of its open shadow roots, in
  // document order.
  const all = (doc) => {
    const out = [];
    const walk = (root) => {
      for (const el of root.querySelectorAll('*')) {
        out.push(el);
        if (el.shadowRoot) walk(el.shadowRoot);
      }
    };
    walk(doc);
    return out;
  };
  const isFrame = (el) => el.tagName === 'IFRAME' || el.tagName === 'FRAME';
  // The document of a same-origin frame; null for a cross-origin one
  // (whose contentDocument is null) or one not loaded.
  const frameDoc = (el) => {
    try {
      const d = el.contentDocument;
      return d && d.documentElement ? d : null;
    } catch (e) {
      return null;
    }
  };
  // find: the element with the bid in this document, or else the frame
  // element whose document (or a frame's in it) has it: the caller goes on
  // in that frame.
  const findIn = (doc, bid) => {
    const els = all(doc);
    for (const el of els) {
      if (el.getAttribute(BID) === bid) return el;
    }
    for (const el of els) {
      if (!isFrame(el)) continue;
      const d = frameDoc(el);
      if (d && findIn(d, bid)) return el;
    }
    return null;
  };
  if (op === 'find') return findIn(document, arg);
  if (op === 'focus') {
    let a = document.activeElement;
    for (;;) {
      if (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
      else if (a && isFrame(a) && frameDoc(a) && frameDoc(a).activeElement) a = frameDoc(a).activeElement;
      else break;
    }
    return a;
  }
  if (op === 'som') return setOfMarks(arg);

  // mark: as BrowserGym's frame_mark_elements, a counter kept by each
  // frame's window numbers the elements not yet marked, prefixed with the
  // bid of the frame's element (none in the top document); frame elements
  // are lettered instead ("a", "b", ..., "z", "aa"). An element whose bid
  // another holds too (a clone) gets a new one. Same-origin frames are
  // marked recursively; elems holds each element with the offset of its
  // document in the top viewport.
  const letters = (n) => {
    let s = '';
    for (n++; n > 0; n = Math.floor((n - 1) / 26)) s = String.fromCharCode(97 + ((n - 1) % 26)) + s;
    return s;
  };
  const elems = [];
  const markDoc = (doc, prefix, ox, oy) => {
    const win = doc.defaultView || window;
    let next = win.__bothy_next_bid || 0, nextFrame = win.__bothy_next_frame || 0;
    const seen = new Set();
    const els = all(doc);
    for (const el of els) {
      let b = el.getAttribute(BID);
      if (b === null || seen.has(b)) {
        b = prefix + (isFrame(el) ? letters(nextFrame++) : String(next++));
        el.setAttribute(BID, b);
      }
      seen.add(b);
      elems.push({ el, ox, oy, win });
    }
    win.__bothy_next_bid = next;
    win.__bothy_next_frame = nextFrame;
    for (const el of els) {
      if (!isFrame(el)) continue;
      const d = frameDoc(el);
      if (!d) continue;
      const r = el.getBoundingClientRect();
      markDoc(d, el.getAttribute(BID), ox + r.left + el.clientLeft, oy + r.top + el.clientTop);
    }
  };
  markDoc(document, '', 0, 0);

  const vw = window.innerWidth, vh = window.innerHeight;
  const clickableTags = new Set(['A', 'BUTTON', 'INPUT', 'SELECT', 'TEXTAREA', 'SUMMARY', 'OPTION', 'LABEL']);
  const clickableRoles = new Set(['button', 'link', 'checkbox', 'radio', 'tab', 'menuitem', 'option', 'switch', 'combobox', 'textbox']);
  const props = {};
  if (arg && arg.props) {
    for (const { el, ox, oy, win } of elems) {
      const b = el.getBoundingClientRect();
      const r = { x: b.x + ox, y: b.y + oy, width: b.width, height: b.height, left: b.left + ox, top: b.top + oy, right: b.right + ox, bottom: b.bottom + oy };
      const p = { visibility: 0, bbox: null, clickable: false, set_of_marks: false };
      if (r.width > 0 && r.height > 0) {
        p.bbox = [r.x, r.y, r.width, r.height];
        const st = win.getComputedStyle(el);
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
  for (;;) {
    if (focused && focused.shadowRoot && focused.shadowRoot.activeElement) focused = focused.shadowRoot.activeElement;
    else if (focused && isFrame(focused) && frameDoc(focused) && frameDoc(focused).activeElement) focused = frameDoc(focused).activeElement;
    else break;
  }
  const fb = focused && focused.tagName !== 'BODY' && focused.tagName !== 'HTML' ? focused.getAttribute(BID) || '' : '';
  return { url: location.href, title: document.title, content, focused: fb, props };
}
