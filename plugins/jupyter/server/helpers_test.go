package server

import "github.com/bothy-sandbox/bothy/executor/api"

func eventOf(typ, text string) api.KernelEvent { return api.KernelEvent{Type: typ, Text: text} }

func apiResult(data map[string]any) api.KernelEvent {
	return api.KernelEvent{Type: api.KernelResult, Data: data}
}

func apiError(tb []string) api.KernelEvent {
	return api.KernelEvent{Type: api.KernelError, Traceback: tb}
}
