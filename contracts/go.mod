module github.com/berth-project/berth/contracts

go 1.26.0

replace github.com/berth-project/berth/shared => ../shared

require (
	github.com/berth-project/berth/shared v0.0.0
	github.com/berth-project/berth/uploads v0.0.0
	github.com/pact-foundation/pact-go/v2 v2.4.2
)

require (
	github.com/hashicorp/go-version v1.7.0 // indirect
	github.com/hashicorp/logutils v1.0.0 // indirect
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/kr/text v0.2.0 // indirect
	github.com/spf13/afero v1.15.0 // indirect
	github.com/spf13/cobra v1.10.1 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
	golang.org/x/net v0.60.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.43.0 // indirect
	google.golang.org/genproto/googleapis/rpc v0.0.0-20250324211829-b45e905df463 // indirect
	google.golang.org/grpc v1.73.0 // indirect
	google.golang.org/protobuf v1.36.11 // indirect
	gopkg.in/yaml.v3 v3.0.1 // indirect
)

replace github.com/berth-project/berth/uploads => ../uploads

require github.com/berth-project/berth/engine v0.0.0

replace github.com/berth-project/berth/engine => ../engine
