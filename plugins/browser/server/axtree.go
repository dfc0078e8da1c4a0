package server

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-rod/rod"
	"github.com/go-rod/rod/lib/proto"
)

// axTree returns the page's accessibility tree as BrowserGym's
// extract_merged_axtree does (CDP's nodes, each with the "browsergym_id"
// of its element), and as text, one node a line ("[12] button 'Submit'").
// Call it after the elements are marked.
func axTree(p *rod.Page) (map[string]any, string, error) {
	depth := -1
	doc, err := proto.DOMGetDocument{Depth: &depth, Pierce: true}.Call(p)
	if err != nil {
		return nil, "", fmt.Errorf("accessibility tree: read the DOM: %w", err)
	}
	bids := map[proto.DOMBackendNodeID]string{}
	var walk func(n *proto.DOMNode)
	walk = func(n *proto.DOMNode) {
		for i := 0; i+1 < len(n.Attributes); i += 2 {
			if n.Attributes[i] == "bid" {
				bids[n.BackendNodeID] = n.Attributes[i+1]
			}
		}
		for _, c := range n.Children {
			walk(c)
		}
		for _, c := range n.ShadowRoots {
			walk(c)
		}
		if n.ContentDocument != nil {
			walk(n.ContentDocument)
		}
	}
	walk(doc.Root)
	all, err := mergedAXTree(p)
	if err != nil {
		return nil, "", err
	}
	nodes := make([]any, 0, len(all))
	for _, n := range all {
		b, err := json.Marshal(n)
		if err != nil {
			return nil, "", fmt.Errorf("accessibility tree: %w", err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, "", fmt.Errorf("accessibility tree: %w", err)
		}
		if bid, ok := bids[n.BackendDOMNodeID]; ok {
			m["browsergym_id"] = bid
		}
		nodes = append(nodes, m)
	}
	return map[string]any{"nodes": nodes}, flatten(all, bids), nil
}

// mergedAXTree is the accessibility tree of the page and of its frames, as
// BrowserGym's extract_merged_axtree makes it: each frame's nodes (their
// ids prefixed with the frame's, to keep them apart) hang below the node
// of their frame element. A frame whose tree cannot be read (a
// cross-origin frame in another process) is left out.
func mergedAXTree(p *rod.Page) ([]*proto.AccessibilityAXNode, error) {
	tree, err := proto.AccessibilityGetFullAXTree{}.Call(p)
	if err != nil {
		return nil, fmt.Errorf("accessibility tree: %w", err)
	}
	all := tree.Nodes
	frames, err := proto.PageGetFrameTree{}.Call(p)
	if err != nil {
		return all, nil
	}
	var children func(t *proto.PageFrameTree)
	children = func(t *proto.PageFrameTree) {
		for _, c := range t.ChildFrames {
			defer children(c) // once its own nodes are in
			id := c.Frame.ID
			owner, err := proto.DOMGetFrameOwner{FrameID: id}.Call(p)
			if err != nil {
				continue
			}
			sub, err := proto.AccessibilityGetFullAXTree{FrameID: id}.Call(p)
			if err != nil || len(sub.Nodes) == 0 {
				continue
			}
			var host *proto.AccessibilityAXNode
			for _, n := range all {
				if n.BackendDOMNodeID == owner.BackendNodeID {
					host = n
				}
			}
			if host == nil {
				continue
			}
			prefix := string(id) + "_"
			for _, n := range sub.Nodes {
				n.NodeID = proto.AccessibilityAXNodeID(prefix) + n.NodeID
				if n.ParentID != "" {
					n.ParentID = proto.AccessibilityAXNodeID(prefix) + n.ParentID
				}
				for i := range n.ChildIDs {
					n.ChildIDs[i] = proto.AccessibilityAXNodeID(prefix) + n.ChildIDs[i]
				}
			}
			sub.Nodes[0].ParentID = host.NodeID
			host.ChildIDs = append(host.ChildIDs, sub.Nodes[0].NodeID)
			all = append(all, sub.Nodes...)
		}
	}
	children(frames.FrameTree)
	return all, nil
}

// skipRoles are the roles whose nodes flatten leaves out (their children
// kept), when they have no name: BrowserGym's ignored and generic nodes.
var skipRoles = map[string]bool{"generic": true, "none": true, "InlineTextBox": true, "LineBreak": true, "RootWebArea": false}

// flatten renders the tree as BrowserGym's flatten_axtree_to_str does:
// one line a node, indented by depth, "[bid] role 'name'" and the node's
// notable properties.
func flatten(nodes []*proto.AccessibilityAXNode, bids map[proto.DOMBackendNodeID]string) string {
	byID := make(map[proto.AccessibilityAXNodeID]*proto.AccessibilityAXNode, len(nodes))
	for _, n := range nodes {
		byID[n.NodeID] = n
	}
	var b strings.Builder
	var walk func(n *proto.AccessibilityAXNode, depth int, parentName string)
	walk = func(n *proto.AccessibilityAXNode, depth int, parentName string) {
		role, name := axValue(n.Role), axValue(n.Name)
		show := !n.Ignored && !(skipRoles[role] && name == "") && !(role == "StaticText" && strings.Contains(parentName, name))
		next := depth
		if show {
			b.WriteString(strings.Repeat("\t", depth))
			if bid, ok := bids[n.BackendDOMNodeID]; ok {
				b.WriteString("[" + bid + "] ")
			}
			b.WriteString(role + " " + pyRepr(name))
			for _, pr := range n.Properties {
				v := axValue(pr.Value)
				switch pr.Name {
				case "focusable", "editable", "readonly", "level", "settable", "multiline", "hiddenRoot", "url":
					continue
				}
				if v == "" {
					continue
				}
				b.WriteString(", " + string(pr.Name) + "=" + pyRepr(v))
			}
			if n.Value != nil && axValue(n.Value) != "" {
				b.WriteString(", value=" + pyRepr(axValue(n.Value)))
			}
			b.WriteByte('\n')
			next = depth + 1
		}
		for _, c := range n.ChildIDs {
			if child, ok := byID[c]; ok {
				walk(child, next, name)
			}
		}
	}
	if len(nodes) > 0 {
		walk(nodes[0], 0, "")
	}
	return b.String()
}

// axValue is an AX value as text.
func axValue(v *proto.AccessibilityAXValue) string {
	if v == nil {
		return ""
	}
	var s any
	if err := json.Unmarshal([]byte(v.Value.JSON("", "")), &s); err != nil {
		return ""
	}
	switch s := s.(type) {
	case string:
		return s
	case nil:
		return ""
	case bool:
		if s {
			return "True"
		}
		return "False"
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// pyRepr quotes s as Python's repr of a str does, roughly.
func pyRepr(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		return strconv.Quote(s)
	}
	q := strconv.Quote(s)
	q = strings.ReplaceAll(q[1:len(q)-1], `\"`, `"`)
	return "'" + strings.ReplaceAll(q, "'", `\'`) + "'"
}
