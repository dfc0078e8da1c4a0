// Command mkimage packs a root filesystem tarball, or the machine's static
// busybox, into a reproducible OCI archive. The Makefile uses it to build the
// embedded default image and the test images from Debian packages.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/bothy-sandbox/bothy/internal/testimage"
)

func main() {
	rootfs := flag.String("rootfs", "", "rootfs tarball, or \"busybox\" for the static busybox image")
	out := flag.String("o", "", "output OCI archive")
	name := flag.String("name", "", "image name annotation, e.g. bothy-default:latest")
	cmd := flag.String("cmd", "/bin/bash", "default command (space separated)")
	pad := flag.Int("pad-mb", 0, "add this many MB of incompressible data under /opt/pad (benchmark image)")
	flag.Parse()
	if *rootfs == "" || *out == "" || *name == "" {
		flag.Usage()
		os.Exit(2)
	}
	var err error
	if *pad > 0 && *rootfs != "busybox" {
		padded := *out + ".rootfs.tar"
		defer os.Remove(padded)
		if err := testimage.PadRootfs(*rootfs, padded, *pad); err != nil {
			fmt.Fprintln(os.Stderr, "mkimage:", err)
			os.Exit(1)
		}
		*rootfs = padded
	}
	if *rootfs == "busybox" {
		err = testimage.BusyboxArchive(*out, *name)
	} else {
		err = testimage.WriteOCIArchive(*rootfs, *out, testimage.ArchiveOptions{
			Name: *name,
			Cmd:  strings.Fields(*cmd),
			Env:  []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8"},
		})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkimage:", err)
		os.Exit(1)
	}
}
