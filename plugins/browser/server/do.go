package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/input"
	"github.com/go-rod/rod/lib/proto"
)

// do runs one action on the active page. Its errors read as BrowserGym's
// last_action_error ("ValueError: ...", "TimeoutError: ...").
func (s *service) do(ctx context.Context, c call) error {
	t := s.cur()
	p := t.p.Context(ctx)
	settle := true
	var err error
	switch c.Name {
	case "noop":
		var ms float64
		if ms, err = argNumber(c, "wait_ms"); err == nil {
			err = sleep(ctx, time.Duration(ms*float64(time.Millisecond)))
		}
	case "send_msg_to_user", "report_infeasible":
		var text string
		if text, err = argString(c, map[string]string{"send_msg_to_user": "text", "report_infeasible": "reason"}[c.Name]); err == nil {
			s.messages = append(s.messages, text)
		}
		settle = false
	case "goto":
		var url string
		if url, err = argString(c, "url"); err == nil {
			if err = p.Navigate(url); err != nil {
				err = fmt.Errorf("Error: Page.goto: %w", err)
			}
		}
	case "go_back":
		err = p.NavigateBack()
	case "go_forward":
		err = p.NavigateForward()
	case "new_tab", "tab_new":
		_, err = s.newTab()
		settle = false
	case "tab_close":
		if err = p.Close(); err == nil {
			s.tabs = append(s.tabs[:s.active], s.tabs[s.active+1:]...)
			s.active = len(s.tabs) - 1
			if len(s.tabs) == 0 {
				_, err = s.newTab()
			}
		}
		settle = false
	case "tab_focus":
		var i float64
		if i, err = argNumber(c, "index"); err == nil {
			n := int(i)
			if n < 0 {
				n += len(s.tabs)
			}
			if n < 0 || n >= len(s.tabs) || float64(int(i)) != i {
				return fmt.Errorf("IndexError: list index out of range: %v (%d pages)", i, len(s.tabs))
			}
			s.active = n
			_, err = s.tabs[n].p.Context(ctx).Activate()
		}
		settle = false
	case "scroll":
		var dx, dy float64
		if dx, err = argNumber(c, "delta_x"); err != nil {
			return err
		}
		if dy, err = argNumber(c, "delta_y"); err != nil {
			return err
		}
		err = p.Mouse.Scroll(dx, dy, 1)
	case "keyboard_press":
		var key string
		if key, err = argString(c, "key"); err == nil {
			err = pressKeys(p, key)
		}
	case "keyboard_type", "keyboard_insert_text":
		var text string
		if text, err = argString(c, "text"); err == nil {
			err = p.InsertText(text)
		}
	case "mouse_move", "mouse_click", "mouse_dblclick":
		var x, y float64
		if x, err = argNumber(c, "x"); err != nil {
			return err
		}
		if y, err = argNumber(c, "y"); err != nil {
			return err
		}
		if err = p.Mouse.MoveTo(proto.Point{X: x, Y: y}); err != nil || c.Name == "mouse_move" {
			break
		}
		var button proto.InputMouseButton
		if button, err = mouseButton(c); err == nil {
			err = p.Mouse.Click(button, map[bool]int{true: 2, false: 1}[c.Name == "mouse_dblclick"])
		}
	default:
		err = s.doElement(ctx, p, c)
	}
	if err != nil {
		return err
	}
	if settle {
		s.settle(ctx, t)
	}
	return nil
}

// doElement runs an action on an element named by its bid.
func (s *service) doElement(ctx context.Context, p *rod.Page, c call) error {
	key := "bid"
	if c.Name == "drag_and_drop" {
		key = "from_bid"
	}
	bid, err := argString(c, key)
	if err != nil {
		return err
	}
	ectx, cancel := context.WithTimeout(ctx, elementTimeout)
	defer cancel()
	el, err := findBid(ectx, p, bid)
	if err != nil {
		return err
	}
	err = s.onElement(ectx, p, el, c)
	if err != nil && ectx.Err() != nil && ctx.Err() == nil {
		return fmt.Errorf("TimeoutError: Timeout %dms exceeded (%s on the element with bid %q)", elementTimeout.Milliseconds(), c.Name, bid)
	}
	return err
}

func (s *service) onElement(ctx context.Context, p *rod.Page, el *rod.Element, c call) error {
	switch c.Name {
	case "click", "dblclick":
		button, err := mouseButton(c)
		if err != nil {
			return err
		}
		mods, err := argStrings(c, "modifiers")
		if err != nil {
			if _, ok := c.Args["modifiers"].([]any); !ok {
				return err
			}
		}
		keys, err := keyList(mods)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if err := p.Keyboard.Press(k); err != nil {
				return err
			}
		}
		err = el.Click(button, map[bool]int{true: 2, false: 1}[c.Name == "dblclick"])
		for _, k := range keys {
			p.Keyboard.Release(k)
		}
		return err
	case "hover":
		return el.Hover()
	case "focus":
		return el.Focus()
	case "fill", "clear":
		value := ""
		if c.Name == "fill" {
			var err error
			if value, err = argString(c, "value"); err != nil {
				return err
			}
		}
		if err := evalOn(el, `function() {
			const t = (this.type || '').toLowerCase();
			const text = this.tagName === 'TEXTAREA' || (this.tagName === 'INPUT' && !['checkbox','radio','submit','button','reset','file','image','hidden','range','color'].includes(t));
			if (!text && !this.isContentEditable) return 'Error: Element is not an <input>, <textarea> or [contenteditable] element';
			if (this.disabled || this.readOnly) return 'Error: Element is not editable';
			this.focus();
			if (this.isContentEditable && !text) this.textContent = ''; else this.value = '';
			this.dispatchEvent(new Event('input', {bubbles: true}));
			return '';
		}`); err != nil {
			return err
		}
		if value == "" {
			return nil
		}
		return el.Input(value)
	case "check", "uncheck":
		res, err := el.Eval(`function() { return !!this.checked }`)
		if err != nil {
			return err
		}
		if res.Value.Bool() == (c.Name == "check") {
			return nil
		}
		return el.Click(proto.InputMouseButtonLeft, 1)
	case "select_option":
		opts, err := argStrings(c, "options")
		if err != nil {
			return err
		}
		return evalOn(el, `function(opts) {
			if (this.tagName !== 'SELECT') return 'Error: Element is not a <select> element';
			const want = [];
			for (const o of opts) {
				const m = [...this.options].find(x => x.value === o || x.label === o || x.text.trim() === o);
				if (!m) return 'TimeoutError: no option ' + JSON.stringify(o) + ' in the <select> (its options: ' + [...this.options].map(x => JSON.stringify(x.label)).join(', ') + ')';
				want.push(m);
			}
			if (want.length > 1 && !this.multiple) return 'Error: Element is not a <select multiple>';
			for (const x of this.options) x.selected = want.includes(x);
			this.dispatchEvent(new Event('input', {bubbles: true}));
			this.dispatchEvent(new Event('change', {bubbles: true}));
			return '';
		}`, opts)
	case "press":
		keys, err := argString(c, "key_comb")
		if err != nil {
			return err
		}
		if err := el.Focus(); err != nil {
			return err
		}
		return pressKeys(p, keys)
	case "upload_file":
		files, err := argStrings(c, "file")
		if err != nil {
			return err
		}
		return el.SetFiles(files)
	case "drag_and_drop":
		to, err := argString(c, "to_bid")
		if err != nil {
			return err
		}
		dst, err := findBid(ctx, p, to)
		if err != nil {
			return err
		}
		if err := el.Hover(); err != nil {
			return err
		}
		if err := p.Mouse.Down(proto.InputMouseButtonLeft, 1); err != nil {
			return err
		}
		if err := dst.Hover(); err != nil {
			return err
		}
		return p.Mouse.Up(proto.InputMouseButtonLeft, 1)
	}
	return fmt.Errorf("NameError: name '%s' is not defined", c.Name)
}

// findBid returns the element whose bid attribute is bid, in the document,
// an open shadow root or a same-origin frame (found through rod's frame
// of each frame element on the way, so that rod acts on it in its own
// document); BrowserGym's error when there is none.
func findBid(ctx context.Context, p *rod.Page, bid string) (*rod.Element, error) {
	p = p.Context(ctx)
	for depth := 0; depth < 16; depth++ {
		obj, err := p.Evaluate(rod.Eval(pageJS, "find", bid).ByObject())
		if err != nil {
			return nil, err
		}
		if obj.Subtype == proto.RuntimeRemoteObjectSubtypeNull || obj.ObjectID == "" {
			break
		}
		el, err := p.ElementFromObject(obj)
		if err != nil {
			return nil, err
		}
		if got, err := el.Attribute("bid"); err != nil || (got != nil && *got == bid) {
			return el, err
		}
		// The frame element whose document holds it: go on in that frame.
		if p, err = el.Frame(); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("ValueError: Could not find element with bid %q", bid)
}

// evalOn calls fn on the element; a non-empty string it returns is the
// action's error.
func evalOn(el *rod.Element, fn string, args ...any) error {
	res, err := el.Eval(fn, args...)
	if err != nil {
		return err
	}
	if msg := res.Value.Str(); msg != "" {
		return errors.New(msg)
	}
	return nil
}

func mouseButton(c call) (proto.InputMouseButton, error) {
	b, err := argString(c, "button")
	if err != nil {
		return "", err
	}
	switch b {
	case "left", "middle", "right":
		return proto.InputMouseButton(b), nil
	}
	return "", fmt.Errorf("ValueError: %s(): button must be 'left', 'middle' or 'right', not %q", c.Name, b)
}

// keyNames are Playwright's key names rod knows.
var keyNames = map[string]input.Key{
	"Enter": input.Enter, "Tab": input.Tab, "Escape": input.Escape, "Backspace": input.Backspace, "Delete": input.Delete,
	"ArrowUp": input.ArrowUp, "ArrowDown": input.ArrowDown, "ArrowLeft": input.ArrowLeft, "ArrowRight": input.ArrowRight,
	"Home": input.Home, "End": input.End, "PageUp": input.PageUp, "PageDown": input.PageDown, "Insert": input.Insert,
	"Shift": input.ShiftLeft, "Control": input.ControlLeft, "Alt": input.AltLeft, "Meta": input.MetaLeft,
	"ControlOrMeta": input.ControlLeft, "Space": input.Space, " ": input.Space,
	"F1": input.F1, "F2": input.F2, "F3": input.F3, "F4": input.F4, "F5": input.F5, "F6": input.F6,
	"F7": input.F7, "F8": input.F8, "F9": input.F9, "F10": input.F10, "F11": input.F11, "F12": input.F12,
}

// keyOf is the key named name: a Playwright key name or one character
// rod's US keyboard has.
func keyOf(name string) (k input.Key, err error) {
	if k, ok := keyNames[name]; ok {
		return k, nil
	}
	if r, n := utf8.DecodeRuneInString(name); n == len(name) && n > 0 {
		defer func() {
			if recover() != nil {
				err = fmt.Errorf("Error: Unknown key: %q", name)
			}
		}()
		input.Key(r).Info() // panics on a key rod's keyboard lacks
		return input.Key(r), nil
	}
	return 0, fmt.Errorf("Error: Unknown key: %q", name)
}

func keyList(names []string) ([]input.Key, error) {
	out := make([]input.Key, 0, len(names))
	for _, n := range names {
		k, err := keyOf(n)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, nil
}

// pressKeys presses a Playwright key combination ("Enter", "Control+a",
// "Shift++"): the modifiers held, the last key pressed and released.
func pressKeys(p *rod.Page, comb string) error {
	parts := strings.Split(comb, "+")
	if strings.HasSuffix(comb, "++") || comb == "+" {
		parts = append(parts[:len(parts)-2], "+")
	}
	keys, err := keyList(parts)
	if err != nil {
		return err
	}
	mods, last := keys[:len(keys)-1], keys[len(keys)-1]
	for _, k := range mods {
		if err := p.Keyboard.Press(k); err != nil {
			return err
		}
	}
	err = p.Keyboard.Type(last)
	for _, k := range mods {
		p.Keyboard.Release(k)
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
