"""Form settings and translations: formSettings.get/update, translations.listEntries."""
