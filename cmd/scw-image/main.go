package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"

	"github.com/scw-lb-ipam/scw-lb-ipam/internal/ociimage"
)

const usage = `scw-image: the scw-lb-ipam container image, built without Docker

Usage:
  scw-image build -out DIR -version V [flags]   build the binaries, the image and the SBOM into DIR
  scw-image push -layout DIR -repository R [flags]
                                                push the image index as R:VERSION

Run "scw-image build -h" or "scw-image push -h" for the flags.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scw-image:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errors.New("a command is required")
	}
	switch args[0] {
	case "build":
		return build(ctx, args[1:], stdout, stderr)
	case "push":
		return push(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

func build(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o ociimage.Options
	var epoch string
	fs := flag.NewFlagSet("build", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Out, "out", "bin/image", "output directory")
	fs.StringVar(&o.Version, "version", "", "release version, without v (the chart's appVersion)")
	fs.StringVar(&o.Revision, "revision", "", "commit the image is built from")
	fs.StringVar(&o.Source, "source", "https://github.com/scw-lb-ipam/scw-lb-ipam", "repository URL (org.opencontainers.image.source)")
	fs.StringVar(&o.Repository, "repository", "ghcr.io/scw-lb-ipam/scw-lb-ipam", "image name in the docker tarball and the layout")
	fs.StringVar(&o.TarballArch, "tarball-arch", "amd64", "architecture of the image in the docker tarball (docker load takes one)")
	fs.StringVar(&epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "every timestamp in the image, in seconds since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
	arches := fs.String("arches", strings.Join(ociimage.Arches(), ","), "architectures to build, comma-separated (the release builds every one)")
	fs.StringVar(&o.Dir, "dir", "", "the module to build, if not the current directory (another version's tree)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("build: unexpected arguments %q", fs.Args())
	}
	o.Arches = strings.Split(*arches, ",")
	if err := o.CheckArches(); err != nil {
		return fmt.Errorf("build: -arches %s: %w", *arches, err)
	}
	if o.Version == "" {
		return errors.New("build: -version is required")
	}
	secs := int64(0)
	if epoch != "" {
		var err error
		if secs, err = strconv.ParseInt(epoch, 10, 64); err != nil {
			return fmt.Errorf("build: SOURCE_DATE_EPOCH %q is not a number of seconds", epoch)
		}
	}
	o.Created = time.Unix(secs, 0).UTC()
	digest, err := ociimage.Build(ctx, o)
	if err != nil {
		return err
	}
	for _, arch := range ociimage.Arches() {
		bin := filepath.Join(o.Out, "linux-"+arch, ociimage.BinaryName)
		if fi, err := os.Stat(bin); err == nil {
			fmt.Fprintf(stdout, "linux/%s  binary %.1f MB\n", arch, float64(fi.Size())/1e6)
		}
	}
	fmt.Fprintf(stdout, "%s:%s %s (created %s)\n", o.Repository, o.Version, digest, o.Created.Format(time.RFC3339))
	return nil
}

func push(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o ociimage.PushOptions
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Layout, "layout", "bin/image/oci", "OCI layout written by build")
	fs.StringVar(&o.Repository, "repository", "", "where to push, e.g. ghcr.io/OWNER/scw-lb-ipam; the tag is the image's version")
	fs.StringVar(&o.GitTag, "git-tag", "", "if set, must be v + the image's version")
	fs.StringVar(&o.Chart, "chart", "", "if set, a chart directory whose version and appVersion must be the image's version")
	pin := fs.String("pin-chart", "", "with -chart: write a copy of the chart there that runs the pushed image by digest, the chart to package")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 || o.Repository == "" {
		return errors.New("push: -repository is required, and takes no arguments")
	}
	// In GitHub Actions, GITHUB_TOKEN (with packages: write) is GHCR's
	// password; elsewhere, the docker config's credentials are used.
	if token := os.Getenv("GITHUB_TOKEN"); token != "" {
		user := os.Getenv("GITHUB_ACTOR")
		if user == "" {
			user = "x-access-token"
		}
		o.Auth = &authn.Basic{Username: user, Password: token}
	}
	if *pin != "" && o.Chart == "" {
		return errors.New("push: -pin-chart needs -chart")
	}
	ref, err := ociimage.Push(ctx, o)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "pushed", ref)
	if *pin != "" {
		if err := ociimage.PinChart(o.Chart, *pin, ref.DigestStr()); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s: the chart, running %s\n", *pin, ref)
	}
	return nil
}
