// Command scw-docs writes the generated parts of the docs and the chart's
// schema from the code (make generate), or checks that they are up to date
// (make verify, -verify): see internal/docs.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/docs"
)

func main() {
	root := flag.String("root", ".", "the module's root directory")
	verify := flag.Bool("verify", false, "write nothing; fail when a generated file differs from what make generate writes")
	flag.Parse()
	files, err := docs.Generate(*root)
	if err == nil && *verify {
		err = docs.Verify(*root, files)
	} else if err == nil {
		err = docs.Write(*root, files)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
