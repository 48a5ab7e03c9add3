// Package doccheck holds a repository-wide test: every exported name in the module has a
// doc comment, and every package has a package doc.
package doccheck
