module github.com/berth-project/berth/uploads

go 1.25.0

require github.com/berth-project/berth/shared v0.0.0

replace github.com/berth-project/berth/shared => ../shared
