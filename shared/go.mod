module github.com/berth-project/berth/shared

go 1.25.0
