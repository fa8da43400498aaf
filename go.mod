module github.com/scw-lb-ipam/scw-lb-ipam

go 1.26.0

require (
	github.com/google/uuid v1.6.0
	github.com/scaleway/scaleway-sdk-go v1.39.0
	go4.org/netipx v0.0.0-20260823151212-3075585bcbeb
	k8s.io/apimachinery v0.37.0
	k8s.io/utils v0.0.0-20260707023825-cf1189d6abe3
	sigs.k8s.io/yaml v1.6.0
)

require (
	github.com/go-logr/logr v1.4.3 // indirect
	github.com/kr/text v0.2.0 // indirect
	go.yaml.in/yaml/v2 v2.4.4 // indirect
	gopkg.in/yaml.v2 v2.4.0 // indirect
	k8s.io/klog/v2 v2.140.0 // indirect
)
