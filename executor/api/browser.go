package api

import "encoding/json"

// BrowseURLArgs are the args of a "browse" action (BrowseURLAction):
// goto(url).
type BrowseURLArgs struct {
	URL          string          `json:"url"`
	ReturnAXTree bool            `json:"return_axtree,omitempty"`
	Thought      json.RawMessage `json:"thought,omitempty"`
}

// BrowseInteractiveArgs are the args of a "browse_interactive" action
// (BrowseInteractiveAction): BrowserGym's high-level actions, one call a
// line.
type BrowseInteractiveArgs struct {
	BrowserActions          string          `json:"browser_actions"`
	BrowsergymSendMsgToUser string          `json:"browsergym_send_msg_to_user,omitempty"`
	ReturnAXTree            bool            `json:"return_axtree,omitempty"`
	Thought                 json.RawMessage `json:"thought,omitempty"`
}

// BrowserOutputExtras are the extras of a "browse" observation
// (OpenHands' BrowserOutputObservation without its content).
type BrowserOutputExtras struct {
	URL             string `json:"url"`
	TriggerByAction string `json:"trigger_by_action"`
	// Screenshot is the viewport as a PNG data URL; SetOfMarks the same
	// with each marked element's bid drawn on it.
	Screenshot     string   `json:"screenshot"`
	ScreenshotPath *string  `json:"screenshot_path"`
	SetOfMarks     string   `json:"set_of_marks"`
	Error          bool     `json:"error"`
	GoalImageURLs  []string `json:"goal_image_urls"`
	OpenPagesURLs  []string `json:"open_pages_urls"`
	// ActivePageIndex indexes OpenPagesURLs (-1: no page).
	ActivePageIndex int `json:"active_page_index"`
	// DOMObject is not produced (OpenHands does not send it either).
	DOMObject map[string]any `json:"dom_object"`
	// AXTreeObject is the accessibility tree as CDP's
	// Accessibility.getFullAXTree gives it, each node with its element's
	// "browsergym_id"; empty unless the action asked return_axtree.
	AXTreeObject map[string]any `json:"axtree_object"`
	// ExtraElementProperties are, by bid, each element's visibility
	// (0 to 1), bbox ([x, y, width, height] in the viewport), clickable
	// and set_of_marks; empty unless return_axtree.
	ExtraElementProperties map[string]ElementProperties `json:"extra_element_properties"`
	LastBrowserAction      string                       `json:"last_browser_action"`
	LastBrowserActionError string                       `json:"last_browser_action_error"`
	FocusedElementBID      string                       `json:"focused_element_bid"`
	FilterVisibleOnly      bool                         `json:"filter_visible_only"`
}

// ElementProperties are BrowserGym's extra properties of one element.
type ElementProperties struct {
	Visibility float64     `json:"visibility"`
	BBox       *[4]float64 `json:"bbox"`
	Clickable  bool        `json:"clickable"`
	SetOfMarks bool        `json:"set_of_marks"`
}

// BrowserNavigateRequest is the body of POST /plugins/browser/navigate.
type BrowserNavigateRequest struct {
	URL string `json:"url"`
	// AXTree asks for the accessibility tree (as return_axtree does).
	AXTree bool `json:"axtree,omitempty"`
	// Timeout bounds the navigation and the observation, in seconds
	// (default 60).
	Timeout float64 `json:"timeout,omitempty"`
}

// BrowserActionRequest is the body of POST /plugins/browser/action.
type BrowserActionRequest struct {
	// Actions are BrowserGym action strings, one call a line, as
	// browse_interactive's browser_actions.
	Actions string  `json:"actions"`
	AXTree  bool    `json:"axtree,omitempty"`
	Timeout float64 `json:"timeout,omitempty"`
}

// BrowserState is the answer to the browser plugin's native routes: the
// state of the browser after the actions.
type BrowserState struct {
	URL   string `json:"url"`
	Title string `json:"title"`
	// Content is the active page's text as markdown.
	Content string `json:"content"`
	// Screenshot is the viewport as a PNG data URL.
	Screenshot        string   `json:"screenshot"`
	OpenPagesURLs     []string `json:"open_pages_urls"`
	ActivePageIndex   int      `json:"active_page_index"`
	FocusedElementBID string   `json:"focused_element_bid"`
	// LastAction is the last action run; Error its error, which stopped
	// the actions after it ("" when all ran).
	LastAction string `json:"last_action"`
	Error      string `json:"error"`
	// Messages are the texts the actions sent with send_msg_to_user.
	Messages []string `json:"messages"`
	// AXTree is the accessibility tree as text, one node a line with its
	// bid ("[12] button 'Submit'"), when asked.
	AXTree string `json:"axtree,omitempty"`
	// Elements are the elements' extra properties by bid, when the tree
	// was asked for.
	Elements map[string]ElementProperties `json:"elements,omitempty"`
	// SetOfMarks is the screenshot with a box and the bid of each element
	// whose properties have set_of_marks, a PNG data URL, when the tree
	// was asked for.
	SetOfMarks string `json:"set_of_marks,omitempty"`
	// Downloads are the files the actions downloaded, where they were
	// saved.
	Downloads []string `json:"downloads,omitempty"`
}

// ObservationDownload is OpenHands' FileDownloadObservation: a browser
// action downloaded a file.
const ObservationDownload = "download"

// FileDownloadExtras are a download observation's extras.
type FileDownloadExtras struct {
	// FilePath is where the file was saved.
	FilePath string `json:"file_path"`
}
