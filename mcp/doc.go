// Package mcp serves the service over the Model Context Protocol (issue
// 17), on github.com/modelcontextprotocol/go-sdk.
package mcp
