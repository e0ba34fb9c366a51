module github.com/berth-project/berth/contracts

go 1.25.0

require github.com/berth-project/berth/shared v0.0.0

replace github.com/berth-project/berth/shared => ../shared

require github.com/berth-project/berth/uploads v0.0.0

replace github.com/berth-project/berth/uploads => ../uploads
