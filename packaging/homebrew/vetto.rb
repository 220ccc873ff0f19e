# Homebrew formula for vetto's prebuilt binaries. The release workflow
# (.github/workflows/release.yml) renders this file with the release's
# version and SHA256SUMS (packaging/homebrew/render) and attaches the
# result to the release as vetto.rb, for a tap to copy. The checksums below
# are placeholders until then: installing this file as it is fails the
# checksum check, by design.
class Vetto < Formula
  desc "Kernel sandbox for CI jobs and AI coding agents"
  homepage "https://github.com/vetto/action"
  version "0.1.0"
  license "Apache-2.0"

  on_macos do
    on_arm do
      url "https://github.com/vetto/action/releases/download/v#{version}/vetto-aarch64-apple-darwin"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000" # aarch64-apple-darwin
    end
    on_intel do
      url "https://github.com/vetto/action/releases/download/v#{version}/vetto-x86_64-apple-darwin"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000" # x86_64-apple-darwin
    end
  end

  on_linux do
    on_arm do
      url "https://github.com/vetto/action/releases/download/v#{version}/vetto-aarch64-unknown-linux-musl"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000" # aarch64-unknown-linux-musl
    end
    on_intel do
      url "https://github.com/vetto/action/releases/download/v#{version}/vetto-x86_64-unknown-linux-musl"
      sha256 "0000000000000000000000000000000000000000000000000000000000000000" # x86_64-unknown-linux-musl
    end
  end

  def install
    bin.install Dir["vetto-*"].first => "vetto"
  end

  test do
    assert_match "vetto #{version}", shell_output("#{bin}/vetto --version")
  end
end
