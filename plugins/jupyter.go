package plugins

// Jupyter gives the executor an IPython kernel for OpenHands' run_ipython
// actions, from Debian's packages.
var Jupyter = register(Recipe{
	Name:        "jupyter",
	Description: "IPython kernel and Jupyter client (run_ipython actions)",
	Packages:    []string{"python3-ipykernel", "python3-jupyter-client"},
	Check:       "python3 -c 'import ipykernel, jupyter_client' 2>/dev/null",
})
