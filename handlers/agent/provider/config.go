package provider

// Environment variables FromEnv reads.
const (
	EnvOpenAIBaseURL    = "ACTIONSLEDGER_OPENAI_BASE_URL"
	EnvOpenAIAPIKey     = "ACTIONSLEDGER_OPENAI_API_KEY"
	EnvAnthropicBaseURL = "ACTIONSLEDGER_ANTHROPIC_BASE_URL"
	EnvAnthropicAPIKey  = "ACTIONSLEDGER_ANTHROPIC_API_KEY"
)

// FromEnv builds the configured providers by name: "openai" (NewOpenAI)
// from EnvOpenAIBaseURL and EnvOpenAIAPIKey, and "anthropic"
// (NewAnthropic) from EnvAnthropicBaseURL and EnvAnthropicAPIKey. A
// provider is included only when its key or its base URL is set (a local
// server needs no key); an unset base URL means the public API
// (DefaultOpenAIBaseURL, DefaultAnthropicBaseURL). Timeouts and retries
// keep their defaults. getenv is os.Getenv or a stand-in; the map is empty,
// never nil, when nothing is configured.
func FromEnv(getenv func(string) string) map[string]Provider {
	providers := map[string]Provider{}
	if base, key := getenv(EnvOpenAIBaseURL), getenv(EnvOpenAIAPIKey); base != "" || key != "" {
		providers["openai"] = NewOpenAI(OpenAIConfig{BaseURL: base, APIKey: key})
	}
	if base, key := getenv(EnvAnthropicBaseURL), getenv(EnvAnthropicAPIKey); base != "" || key != "" {
		providers["anthropic"] = NewAnthropic(AnthropicConfig{BaseURL: base, APIKey: key})
	}
	return providers
}
