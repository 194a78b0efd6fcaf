import PackagePlugin
import Foundation

/// Writes `BuildRevision.swift` for the target it is applied to: the git commit the package was
/// built from (`git rev-parse --short=12 HEAD`, with `-dirty` when the work tree has changes), or
/// `unknown` outside a git checkout. Reported by `--version` and `checkoutbus_build_info`.
/// The file is rewritten only when the revision changed, so a build with nothing new stays a no-op.
@main
struct BuildRevision: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let output = context.pluginWorkDirectoryURL.appending(path: "generated")
        let package = context.package.directoryURL.path(percentEncoded: false)
        let file = output.appending(path: "BuildRevision.swift").path(percentEncoded: false)
        let script = """
            set -u
            mkdir -p "$(dirname "$2")"
            rev=$(git -C "$1" rev-parse --short=12 HEAD 2>/dev/null) || rev=unknown
            if [ "$rev" != unknown ] && [ -n "$(git -C "$1" status --porcelain --untracked-files=no 2>/dev/null)" ]; then rev="$rev-dirty"; fi
            text="/// Generated at build time by the BuildRevision plugin.
            package enum BuildRevision { package static let value = \\"$rev\\" }"
            [ -f "$2" ] && [ "$(cat "$2")" = "$text" ] || printf '%s\\n' "$text" > "$2"
            """
        return [.prebuildCommand(displayName: "Recording the git revision", executable: URL(filePath: "/bin/sh"),
                                 arguments: ["-c", script, "sh", package, file], outputFilesDirectory: output)]
    }
}
