// Package server is the Jupyter plugin's service (package plugins/jupyter
// is the plugin): IPython kernels driven over Jupyter's messaging protocol
// with the pure-Go github.com/go-zeromq/zmq4. It runs in bothy-plugin, never
// in the executor, which would otherwise load the ZMQ and crypto code at
// every sandbox's start; it registers itself with plugins.RegisterServer.
package server
