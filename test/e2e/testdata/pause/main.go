// Command pause is the pod sandbox's process, as registry.k8s.io/pause is:
// it holds the pod's namespaces and does nothing until it is stopped. Built
// static by the e2e suite into the sandbox image it imports, since no image
// can be pulled.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
